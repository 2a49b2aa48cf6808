-- Release-gate verdicts: one row per `pathgrade gate` over runs in the store, with the
-- verdict's JSON report (every row, the seed and the resample count, so it can be printed
-- again in any format and reproduced), and one row per gate row for SQL over gate history
-- (which metric and slice failed, by how much, in which gate).
CREATE TABLE IF NOT EXISTS gates
(
    GateId String,
    DecidedAt DateTime64(6),
    Suite String,
    SuiteFile String,
    CandidateRun String,
    BaselineRun String,
    Passed Bool,
    FailedRows UInt32,
    TotalRows UInt32,
    Seed UInt64,
    Resamples UInt32,
    Confidence Float64,
    Verdict String
)
ENGINE = ReplacingMergeTree
ORDER BY GateId;

CREATE TABLE IF NOT EXISTS gate_rows
(
    GateId String,
    RowIndex UInt32,
    Check LowCardinality(String),
    Metric LowCardinality(String),
    Slice String,
    Passed Bool,
    Items UInt32,
    PairedItems UInt32,
    UnpairedItems UInt32,
    CandidateMean Nullable(Float64),
    BaselineMean Nullable(Float64),
    Delta Nullable(Float64),
    IntervalLow Nullable(Float64),
    IntervalHigh Nullable(Float64),
    Threshold Nullable(Float64),
    MaxRegression Nullable(Float64),
    Reason String
)
ENGINE = ReplacingMergeTree
ORDER BY (GateId, RowIndex);
