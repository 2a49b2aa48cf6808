-- What the alerts page's tools read (batch_plane/store/alerts.py top_tools, traces.py
-- span_tools): the spans of a tool (GenAIToolName) by their key, so the tool of the span an
-- alert is pinned to is found among the tool spans only (about one span in twelve) instead
-- of every span of the alerts' days. Partitioned and sorted as `spans` (by day, then
-- (Tenant, TraceId, SpanId)). Filled by a materialized view on every insert into `spans`,
-- and once from the spans already stored. ReplacingMergeTree on the spans' own key: a
-- replayed span leaves one row after merges, as in `spans`. Kept as long as the spans
-- (`ReceivedAt`; `pathgrade migrate --retention-days` sets both).
CREATE TABLE IF NOT EXISTS tool_spans
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    GenAIToolName LowCardinality(String),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, TraceId, SpanId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS tool_spans_mv TO tool_spans AS
SELECT Tenant, TraceId, SpanId, Timestamp, GenAIToolName, ReceivedAt
FROM spans
WHERE GenAIToolName != '';

INSERT INTO tool_spans
SELECT Tenant, TraceId, SpanId, Timestamp, GenAIToolName, ReceivedAt
FROM spans
WHERE GenAIToolName != '';
