-- Scores: one row per (scorer, version, trace, span, dataset item, run, repeat), written
-- online (sampled traffic) and offline (runs). ScoreId is a deterministic hash of those
-- identifying fields, so re-scoring replaces rather than duplicates (use FINAL).
CREATE TABLE IF NOT EXISTS scores
(
    ScoreId String,
    Tenant LowCardinality(String),
    Metric LowCardinality(String),
    Value Nullable(Float64),
    Label String,
    Explanation String,
    Scorer LowCardinality(String),
    ScorerVersion LowCardinality(String),
    JudgeModel LowCardinality(String),
    RubricVersion LowCardinality(String),
    DatasetItemId String,
    RunId LowCardinality(String),
    Repeat UInt32,
    TraceId String,
    SpanId String,
    Slices Map(LowCardinality(String), String),
    CreatedAt DateTime64(3),
    INDEX idx_run RunId TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_trace TraceId TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY (Tenant, Metric, ScoreId);
