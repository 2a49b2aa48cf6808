-- What the reads of listed traces' alerts need (batch_plane/store/trace_list.py alerts_of,
-- alerts.py of_trace and violations_of, conversations.py alerts): per tenant and trace, its
-- alerts' keys, spans, codes, severities, kinds and tools, sorted by (Tenant, TraceId) in
-- granules of 256 rows, so a page's traces are looked up by key instead of reading
-- `alerts` (sorted by (Tenant, AlertKey): every row of it, 33k at 10M spans, 347k at 100M;
-- its trace-id bloom filter passes every granule for a page's ids). The same dedup as
-- `alerts` (AlertKey, with the trace it hashes) and version (DetectedAtNs): FINAL keeps one
-- row per alert, as `alerts FINAL` does. Filled by a materialized view on every insert into
-- `alerts` (created before the backfill, so no alert stored meanwhile is missed), and once
-- from `alerts FINAL` (not its rows: two rows of an alert with one version, as 0026 wrote
-- them, would leave either). No TTL, as `alerts` has none.
CREATE TABLE IF NOT EXISTS trace_alerts
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    AlertKey String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Code LowCardinality(String),
    Severity LowCardinality(String),
    Kind LowCardinality(String),
    Tool LowCardinality(String),
    DetectedAtNs Int64 CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(DetectedAtNs)
ORDER BY (Tenant, TraceId, AlertKey)
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_alerts_mv TO trace_alerts AS
SELECT Tenant, TraceId, AlertKey, SpanId, Code, Severity, Kind, Tool, DetectedAtNs
FROM alerts;

INSERT INTO trace_alerts
SELECT Tenant, TraceId, AlertKey, SpanId, Code, Severity, Kind, Tool, DetectedAtNs
FROM alerts FINAL;
