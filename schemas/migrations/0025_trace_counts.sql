-- What the alerts page counts its range's traces from (batch_plane/store/traces.py
-- started_in_range): per tenant and hour of the root's start, the set of trace ids whose
-- root started then, as `uniqExact` states of the ids' 64-bit hashes (`cityHash64`: 8
-- bytes a trace), so the whole hours of a range are counted from these rows (one per
-- tenant and hour) instead of every root of `trace_roots` in the range; the partial hours
-- at its edges are read from `trace_roots`. Sets, not counts: a root stored twice (a
-- replayed span) or a trace with several roots merges into one member, so the count is
-- exact (a union of the hours' sets, not a sum of their sizes) unless two trace ids of a
-- tenant share a hash (about n^2 / 2^65 for n traces: under one in a million at 5.5M). Filled by a materialized view on every insert into
-- `spans` (created before the backfill: a root stored meanwhile is in both, counted once),
-- and once from the roots already stored. Kept 90 days from the hour (as the spans by
-- default; a shorter `pathgrade migrate --retention-days` leaves older hours counted here).
CREATE TABLE IF NOT EXISTS trace_counts
(
    Tenant LowCardinality(String),
    Hour DateTime('UTC'),
    Traces AggregateFunction(uniqExact, UInt64)
)
ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(Hour)
ORDER BY (Tenant, Hour)
TTL Hour + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_counts_mv TO trace_counts AS
SELECT Tenant, toStartOfHour(toDateTime(Timestamp, 'UTC')) AS Hour,
       uniqExactState(cityHash64(TraceId)) AS Traces
FROM spans
WHERE ParentSpanId = ''
GROUP BY Tenant, Hour;

INSERT INTO trace_counts
SELECT Tenant, toStartOfHour(toDateTime(Timestamp, 'UTC')) AS Hour,
       uniqExactState(cityHash64(TraceId)) AS Traces
FROM trace_roots
GROUP BY Tenant, Hour;
