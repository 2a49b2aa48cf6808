-- What the browser UI's trace list reads (pathgrade/web/trace_list.py).
--
-- Trace roots: one row per root span (no parent), sorted by (Tenant, Timestamp), so the
-- browser UI's trace list reads a time range newest first without scanning `spans`
-- (which is sorted by trace id). Filled by a materialized view on every insert into
-- `spans`, and once from the spans already stored. ReplacingMergeTree: a replayed root
-- leaves one row after merges (until then the list shows it once).
CREATE TABLE IF NOT EXISTS trace_roots
(
    Tenant LowCardinality(String),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    SpanName LowCardinality(String),
    ServiceName LowCardinality(String),
    GenAIAgentName LowCardinality(String),
    GenAIConversationId String CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String),
    EvalRunId LowCardinality(String),
    EvalDatasetItemId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Timestamp, TraceId, SpanId);

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_roots_mv TO trace_roots AS
SELECT Tenant, Timestamp, TraceId, SpanId, SpanName, ServiceName, GenAIAgentName,
       GenAIConversationId, Duration, StatusCode, EvalRunId, EvalDatasetItemId, ReceivedAt
FROM spans
WHERE ParentSpanId = '';

INSERT INTO trace_roots
SELECT Tenant, Timestamp, TraceId, SpanId, SpanName, ServiceName, GenAIAgentName,
       GenAIConversationId, Duration, StatusCode, EvalRunId, EvalDatasetItemId, ReceivedAt
FROM spans
WHERE ParentSpanId = '';

-- Span counts per minute, service, agent, tool and model (and how many of them are roots),
-- for the trace list's counts per filter value over a time range without scanning `spans`.
-- SummingMergeTree: rows of the same key add up; a span stored twice (a replay) counts
-- twice here, though the list shows it once.
CREATE TABLE IF NOT EXISTS span_counts
(
    Tenant LowCardinality(String),
    Minute DateTime,
    ServiceName LowCardinality(String),
    GenAIAgentName LowCardinality(String),
    GenAIToolName LowCardinality(String),
    Model LowCardinality(String),
    Spans UInt64,
    Roots UInt64
)
ENGINE = SummingMergeTree
PARTITION BY toDate(Minute)
ORDER BY (Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model);

CREATE MATERIALIZED VIEW IF NOT EXISTS span_counts_mv TO span_counts AS
SELECT Tenant, toStartOfMinute(Timestamp) AS Minute, ServiceName, GenAIAgentName,
       GenAIToolName, if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel) AS Model,
       count() AS Spans, countIf(ParentSpanId = '') AS Roots
FROM spans
GROUP BY Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model;

INSERT INTO span_counts
SELECT Tenant, toStartOfMinute(Timestamp) AS Minute, ServiceName, GenAIAgentName,
       GenAIToolName, if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel) AS Model,
       count() AS Spans, countIf(ParentSpanId = '') AS Roots
FROM spans
GROUP BY Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model;
