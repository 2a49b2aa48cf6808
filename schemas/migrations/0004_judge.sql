-- Judge cache: one verdict per sha256(judge model, rubric version, canonical inputs), so a
-- re-run of the same scoring costs nothing. Re-writing a key replaces it (use FINAL).
CREATE TABLE IF NOT EXISTS judge_cache
(
    CacheKey String,
    Model LowCardinality(String),
    RubricVersion LowCardinality(String),
    Output String CODEC(ZSTD(3)),
    InputTokens UInt64,
    OutputTokens UInt64,
    CostUsd Nullable(Float64),
    CreatedAt DateTime64(3)
)
ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY CacheKey;

-- Judge calls: one row per completed request to a judge endpoint (cache hits make none),
-- with its token usage, list-price cost, latency and the attempts it took.
CREATE TABLE IF NOT EXISTS judge_calls
(
    CallId String,
    CacheKey String,
    Model LowCardinality(String),
    RubricVersion LowCardinality(String),
    InputTokens UInt64,
    OutputTokens UInt64,
    CostUsd Nullable(Float64),
    LatencyMs Float64,
    Attempts UInt32,
    CreatedAt DateTime64(3)
)
ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY (Model, RubricVersion, CallId);

-- Judge calibrations against a human-labelled set, keyed by (judge model, rubric version):
-- the latest row per key is the calibration in force (use FINAL).
CREATE TABLE IF NOT EXISTS judge_calibrations
(
    Model LowCardinality(String),
    RubricVersion LowCardinality(String),
    LabelsSha256 String,
    Items UInt32,
    Repeats UInt32,
    Agreement Float64,
    Kappa Float64,
    FalsePassRate Float64,
    JudgeVariance Float64,
    CreatedAt DateTime64(3)
)
ENGINE = ReplacingMergeTree(CreatedAt)
ORDER BY (Model, RubricVersion);
