-- Datasets: versioned collections of evaluation items with an owner and a kind. A version
-- is a draft until published; a published version is immutable (enforced by
-- batch_plane/datasets.py, which refuses to add to it). Rows are re-written on change
-- (status, publish time), so ReplacingMergeTree keyed on (Name, Version); query with FINAL.
CREATE TABLE IF NOT EXISTS datasets
(
    Name String,
    Version UInt32,
    Kind LowCardinality(String),
    Owner String,
    Description String,
    Status LowCardinality(String),
    CreatedAt DateTime64(3),
    PublishedAt Nullable(DateTime64(3)),
    UpdatedAt DateTime64(3)
)
ENGINE = ReplacingMergeTree(UpdatedAt)
ORDER BY (Name, Version);

-- Dataset items: one row per (dataset, version, item). JSON columns hold the item's input,
-- the expected tool calls and the acceptable alternative trajectories as JSON text.
-- SourceTraceId links an item made from a stored trace back to that trace.
CREATE TABLE IF NOT EXISTS dataset_items
(
    Dataset String,
    Version UInt32,
    ItemId String,
    Input String,
    ReferenceAnswer Nullable(String),
    ExpectedToolCalls String,
    AlternativeTrajectories String,
    Slices Map(LowCardinality(String), String),
    SourceTraceId String,
    Tags Array(String),
    AddedAt DateTime64(3),
    INDEX idx_source SourceTraceId TYPE bloom_filter(0.01) GRANULARITY 1
)
ENGINE = ReplacingMergeTree(AddedAt)
ORDER BY (Dataset, Version, ItemId);

-- Runs: one row per offline run of a suite against an agent, re-written when it finishes.
-- DatasetVersions maps each dataset name to the version the run used.
CREATE TABLE IF NOT EXISTS runs
(
    RunId String,
    Suite String,
    SuiteVersion String,
    Agent String,
    DatasetVersions Map(String, UInt32),
    StartedAt DateTime64(3),
    FinishedAt Nullable(DateTime64(3)),
    Status LowCardinality(String),
    Seed UInt64,
    Params String,
    UpdatedAt DateTime64(3)
)
ENGINE = ReplacingMergeTree(UpdatedAt)
ORDER BY RunId;
