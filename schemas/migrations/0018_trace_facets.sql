-- What the trace list's filters on a trace's other spans read (batch_plane/store/trace_list.py):
-- per tenant, facet and value, the traces with a span of that agent ('agent'), tool ('tool'),
-- model ('model': the response model, else the request model) or with a failed span
-- ('error', value 'yes': status Error or a GenAI error type), with the first such span's
-- start. Sorted by (Tenant, Facet, Value, Timestamp), so a filter reads only the rows of its
-- value in its time range, not every span of the range (`spans` is sorted by trace id).
-- Filled by a materialized view on every insert into `spans` (one row per trace, facet and
-- value of each inserted block: a trace's spans inserted in two blocks give two rows), and
-- once from the spans already stored. ReplacingMergeTree: a replayed block leaves one row
-- after merges. No TTL, as `trace_roots` and `span_counts` have none.
CREATE TABLE IF NOT EXISTS trace_facets
(
    Tenant LowCardinality(String),
    Facet LowCardinality(String),
    Value LowCardinality(String),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Facet, Value, Timestamp, TraceId);

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_facets_mv TO trace_facets AS
SELECT Tenant, facet.1 AS Facet, facet.2 AS Value, min(Timestamp) AS Timestamp, TraceId,
       max(ReceivedAt) AS ReceivedAt
FROM spans
ARRAY JOIN arrayFilter(f -> f.2 != '', [
    ('agent', toString(GenAIAgentName)), ('tool', toString(GenAIToolName)),
    ('model', toString(if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel))),
    ('error', if(StatusCode = 'Error' OR GenAIErrorType != '', 'yes', ''))]) AS facet
GROUP BY Tenant, Facet, Value, TraceId;

INSERT INTO trace_facets
SELECT Tenant, facet.1 AS Facet, facet.2 AS Value, min(Timestamp) AS Timestamp, TraceId,
       max(ReceivedAt) AS ReceivedAt
FROM spans
ARRAY JOIN arrayFilter(f -> f.2 != '', [
    ('agent', toString(GenAIAgentName)), ('tool', toString(GenAIToolName)),
    ('model', toString(if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel))),
    ('error', if(StatusCode = 'Error' OR GenAIErrorType != '', 'yes', ''))]) AS facet
GROUP BY Tenant, Facet, Value, TraceId;
