-- A trace's first and last span start per tenant and trace, as `spans_trace_id_ts` (0001)
-- held them, with granules of 256 rows instead of 8,192: every read of a trace's spans
-- first looks its traces up here by key (batch_plane/store/traces.py span_times), and a
-- look-up by key reads one granule per key (the 50 traces of the list's first page at 10M
-- spans: 287k rows of `spans_trace_id_ts`, 12.7k here; docs/scale.md). A table's
-- granularity cannot be altered, so this one replaces it: filled by a materialized view on every insert into `spans`
-- (created before the backfill, so no span stored meanwhile is missed), once from
-- `spans_trace_id_ts` (min and max: a row the view wrote too merges into the same), which
-- is then dropped with its view. Kept as long as `spans_trace_id_ts` was (90 days from the
-- last span's start; `pathgrade migrate --retention-days` sets it with the spans').
CREATE TABLE IF NOT EXISTS trace_times
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime64(9)),
    End SimpleAggregateFunction(max, DateTime64(9))
)
ENGINE = AggregatingMergeTree
ORDER BY (Tenant, TraceId)
TTL toDateTime(End) + INTERVAL 90 DAY
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_times_mv TO trace_times AS
SELECT Tenant, TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM spans
GROUP BY Tenant, TraceId;

INSERT INTO trace_times
SELECT Tenant, TraceId, min(Start) AS Start, max(End) AS End
FROM spans_trace_id_ts
GROUP BY Tenant, TraceId;

DROP VIEW IF EXISTS spans_trace_id_ts_mv;

DROP TABLE IF EXISTS spans_trace_id_ts;
