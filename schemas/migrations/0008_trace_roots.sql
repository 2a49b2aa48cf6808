-- Trace roots: one row per root span (no parent), sorted by (Tenant, Timestamp), so the
-- browser UI's trace list reads a time range newest first without scanning `spans`
-- (which is sorted by trace id). Filled by a materialized view on every insert into
-- `spans`, and once from the spans already stored. ReplacingMergeTree: a replayed root
-- leaves one row after merges (the list reads `LIMIT 1 BY` trace).
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
