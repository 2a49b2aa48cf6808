-- What the trace list reads of each listed trace's scores (batch_plane/store/trace_list.py
-- scores_of): per tenant and trace, its scores' keys, sorted by (Tenant, TraceId), in
-- granules of 256 rows, so the page's 50 traces are looked up by key instead of reading
-- `scores` (sorted by metric and score id: every row of it, 172k at 10M spans). The same
-- dedup key as `scores` (Tenant, Metric, ScoreId, with the trace, which ScoreId hashes) and
-- version (CreatedAt): FINAL keeps one row per score, as `scores FINAL` does. RunId: the
-- demo's clean-up finds a run's scores by it, as in `scores`. Filled by a materialized view
-- on every insert into `scores`, and once from the scores already stored. No TTL, as
-- `scores` has none.
CREATE TABLE IF NOT EXISTS trace_scores
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Metric LowCardinality(String),
    ScoreId String CODEC(ZSTD(1)),
    RunId LowCardinality(String),
    CreatedAt DateTime64(3) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY (Tenant, TraceId, Metric, ScoreId)
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_scores_mv TO trace_scores AS
SELECT Tenant, TraceId, Metric, ScoreId, RunId, CreatedAt
FROM scores;

INSERT INTO trace_scores
SELECT Tenant, TraceId, Metric, ScoreId, RunId, CreatedAt
FROM scores;
