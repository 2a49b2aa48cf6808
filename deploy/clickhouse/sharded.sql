CREATE TABLE IF NOT EXISTS pathgrade_migrations ON CLUSTER 'pathgrade'
(
    Version UInt32,
    Name String,
    Checksum String,
    AppliedAt DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', AppliedAt)
ORDER BY Version
COMMENT 'pathgrade migrations, sharded on cluster pathgrade';

CREATE TABLE IF NOT EXISTS spans_local ON CLUSTER 'pathgrade'
(
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    ParentSpanId String CODEC(ZSTD(1)),
    TraceState String CODEC(ZSTD(1)),
    SpanName LowCardinality(String) CODEC(ZSTD(1)),
    SpanKind LowCardinality(String) CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion String CODEC(ZSTD(1)),
    SpanAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String) CODEC(ZSTD(1)),
    StatusMessage String CODEC(ZSTD(1)),
    Events Nested
    (
        Timestamp DateTime64(9),
        Name LowCardinality(String),
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Links Nested
    (
        TraceId String,
        SpanId String,
        TraceState String,
        Attributes Map(LowCardinality(String), String)
    ) CODEC(ZSTD(1)),
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    GenAIOperation LowCardinality(String) CODEC(ZSTD(1)),
    GenAIProvider LowCardinality(String) CODEC(ZSTD(1)),
    GenAIAgentName LowCardinality(String) CODEC(ZSTD(1)),
    GenAIAgentId String CODEC(ZSTD(1)),
    GenAIToolName LowCardinality(String) CODEC(ZSTD(1)),
    GenAIToolCallId String CODEC(ZSTD(1)),
    GenAIToolType LowCardinality(String) CODEC(ZSTD(1)),
    GenAIToolArguments String CODEC(ZSTD(3)),
    GenAIToolResult String CODEC(ZSTD(3)),
    GenAIConversationId String CODEC(ZSTD(1)),
    GenAIRequestModel LowCardinality(String) CODEC(ZSTD(1)),
    GenAIResponseModel LowCardinality(String) CODEC(ZSTD(1)),
    GenAIInputTokens Nullable(UInt64) CODEC(ZSTD(1)),
    GenAIOutputTokens Nullable(UInt64) CODEC(ZSTD(1)),
    GenAITotalTokens Nullable(UInt64) CODEC(ZSTD(1)),
    GenAIErrorType LowCardinality(String) CODEC(ZSTD(1)),
    GenAIInputMessages String CODEC(ZSTD(3)),
    GenAIOutputMessages String CODEC(ZSTD(3)),
    EvalDatasetItemId String CODEC(ZSTD(1)),
    EvalRunId LowCardinality(String) CODEC(ZSTD(1)),
    EvalReplayIndex Nullable(UInt32) CODEC(ZSTD(1)),
    EvalVariantId LowCardinality(String) CODEC(ZSTD(1)),
    EvalSuiteVersion LowCardinality(String) CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1)),
    INDEX idx_res_attr_key mapKeys(ResourceAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_span_attr_key mapKeys(SpanAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_conversation GenAIConversationId TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_run EvalRunId TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_duration Duration TYPE minmax GRANULARITY 1
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, TraceId, SpanId)
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS spans ON CLUSTER 'pathgrade' AS spans_local
ENGINE = Distributed('pathgrade', currentDatabase(), spans_local, cityHash64(TraceId));

CREATE TABLE IF NOT EXISTS spans_trace_id_ts_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime64(9)),
    End SimpleAggregateFunction(max, DateTime64(9))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
ORDER BY (Tenant, TraceId);

CREATE TABLE IF NOT EXISTS spans_trace_id_ts ON CLUSTER 'pathgrade' AS spans_trace_id_ts_local
ENGINE = Distributed('pathgrade', currentDatabase(), spans_trace_id_ts_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS spans_trace_id_ts_mv ON CLUSTER 'pathgrade' TO spans_trace_id_ts_local AS
SELECT Tenant, TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM spans_local
GROUP BY Tenant, TraceId;

CREATE TABLE IF NOT EXISTS scores_local ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', CreatedAt)
ORDER BY (Tenant, Metric, ScoreId);

CREATE TABLE IF NOT EXISTS scores ON CLUSTER 'pathgrade' AS scores_local
ENGINE = Distributed('pathgrade', currentDatabase(), scores_local, cityHash64(TraceId));

CREATE TABLE IF NOT EXISTS alerts_local ON CLUSTER 'pathgrade'
(
    AlertKey String,
    Tenant LowCardinality(String),
    Code LowCardinality(String),
    Name LowCardinality(String),
    Severity LowCardinality(String),
    Kind LowCardinality(String),
    Reason String,
    TraceId String,
    SpanId String,
    Service LowCardinality(String),
    Agent LowCardinality(String),
    ConversationId String,
    RiskTier LowCardinality(String),
    Policy LowCardinality(String),
    Details String,
    Incomplete UInt8,
    TraceStartNs Int64,
    TraceEndNs Int64,
    DetectedAtNs Int64,
    DetectedAt DateTime64(3) DEFAULT fromUnixTimestamp64Nano(DetectedAtNs),
    INDEX idx_trace TraceId TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', DetectedAtNs)
ORDER BY (Tenant, AlertKey);

CREATE TABLE IF NOT EXISTS alerts ON CLUSTER 'pathgrade' AS alerts_local
ENGINE = Distributed('pathgrade', currentDatabase(), alerts_local, cityHash64(if(JSONExtractBool(Details, 'coverage_gap'), AlertKey, TraceId)));

CREATE VIEW IF NOT EXISTS alerts_view ON CLUSTER 'pathgrade' AS SELECT * FROM alerts FINAL;

CREATE TABLE IF NOT EXISTS judge_cache_local ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', CreatedAt)
ORDER BY CacheKey;

CREATE TABLE IF NOT EXISTS judge_cache ON CLUSTER 'pathgrade' AS judge_cache_local
ENGINE = Distributed('pathgrade', currentDatabase(), judge_cache_local, cityHash64(CacheKey));

CREATE TABLE IF NOT EXISTS judge_calls_local ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', CreatedAt)
ORDER BY (Model, RubricVersion, CallId);

CREATE TABLE IF NOT EXISTS judge_calls ON CLUSTER 'pathgrade' AS judge_calls_local
ENGINE = Distributed('pathgrade', currentDatabase(), judge_calls_local, cityHash64(CallId));

CREATE TABLE IF NOT EXISTS judge_calibrations ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', CreatedAt)
ORDER BY (Model, RubricVersion);

CREATE TABLE IF NOT EXISTS datasets ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', UpdatedAt)
ORDER BY (Name, Version);

CREATE TABLE IF NOT EXISTS dataset_items ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', AddedAt)
ORDER BY (Dataset, Version, ItemId);

CREATE TABLE IF NOT EXISTS runs ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', UpdatedAt)
ORDER BY RunId;

CREATE TABLE IF NOT EXISTS gates ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}')
ORDER BY GateId;

CREATE TABLE IF NOT EXISTS gate_rows ON CLUSTER 'pathgrade'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}')
ORDER BY (GateId, RowIndex);

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS RegressionCheck String DEFAULT '';

ALTER TABLE datasets ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (Name, Version, Tenant);

ALTER TABLE datasets ON CLUSTER 'pathgrade' MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (Dataset, Version, ItemId, Tenant);

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE runs ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (RunId, Tenant);

ALTER TABLE runs ON CLUSTER 'pathgrade' MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE gates ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (GateId, Tenant);

ALTER TABLE gates ON CLUSTER 'pathgrade' MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

ALTER TABLE gate_rows ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tenant LowCardinality(String),
    MODIFY ORDER BY (GateId, RowIndex, Tenant);

ALTER TABLE gate_rows ON CLUSTER 'pathgrade' MODIFY COLUMN Tenant LowCardinality(String) DEFAULT 'default';

CREATE TABLE IF NOT EXISTS trace_roots_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    SpanName LowCardinality(String),
    ServiceName LowCardinality(String),
    GenAIAgentName LowCardinality(String),
    GenAIConversationId String CODEC(ZSTD(1)),
    Duration UInt64 CODEC(ZSTD(1)),
    StatusCode LowCardinality(String),
    EvalRunId LowCardinality(String),
    EvalDatasetItemId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Timestamp, TraceId, SpanId);

CREATE TABLE IF NOT EXISTS trace_roots ON CLUSTER 'pathgrade' AS trace_roots_local
ENGINE = Distributed('pathgrade', currentDatabase(), trace_roots_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_roots_mv ON CLUSTER 'pathgrade' TO trace_roots_local AS
SELECT Tenant, Timestamp, TraceId, SpanId, SpanName, ServiceName, GenAIAgentName,
       GenAIConversationId, Duration, StatusCode, EvalRunId, EvalDatasetItemId, ReceivedAt
FROM spans_local
WHERE ParentSpanId = '';

INSERT INTO trace_roots
SELECT Tenant, Timestamp, TraceId, SpanId, SpanName, ServiceName, GenAIAgentName,
       GenAIConversationId, Duration, StatusCode, EvalRunId, EvalDatasetItemId, ReceivedAt
FROM spans
WHERE ParentSpanId = '';

CREATE TABLE IF NOT EXISTS span_counts_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Minute DateTime,
    ServiceName LowCardinality(String),
    GenAIAgentName LowCardinality(String),
    GenAIToolName LowCardinality(String),
    Model LowCardinality(String),
    Spans UInt64,
    Roots UInt64
)
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toDate(Minute)
ORDER BY (Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model);

CREATE TABLE IF NOT EXISTS span_counts ON CLUSTER 'pathgrade' AS span_counts_local
ENGINE = Distributed('pathgrade', currentDatabase(), span_counts_local, rand());

CREATE MATERIALIZED VIEW IF NOT EXISTS span_counts_mv ON CLUSTER 'pathgrade' TO span_counts_local AS
SELECT Tenant, toStartOfMinute(Timestamp) AS Minute, ServiceName, GenAIAgentName,
       GenAIToolName, if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel) AS Model,
       count() AS Spans, countIf(ParentSpanId = '') AS Roots
FROM spans_local
GROUP BY Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model;

INSERT INTO span_counts
SELECT Tenant, toStartOfMinute(Timestamp) AS Minute, ServiceName, GenAIAgentName,
       GenAIToolName, if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel) AS Model,
       count() AS Spans, countIf(ParentSpanId = '') AS Roots
FROM spans
GROUP BY Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS ContentAttributes Map(LowCardinality(String), String) CODEC(ZSTD(3)) AFTER SpanAttributes;

ALTER TABLE spans ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS ContentAttributes Map(LowCardinality(String), String) CODEC(ZSTD(3)) AFTER SpanAttributes;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS EventContentAttributes Array(Map(LowCardinality(String), String)) CODEC(ZSTD(3));

ALTER TABLE spans ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS EventContentAttributes Array(Map(LowCardinality(String), String)) CODEC(ZSTD(3));

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN ContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN EventContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN GenAIToolArguments TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN GenAIToolResult TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN GenAIInputMessages TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY COLUMN GenAIOutputMessages TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

ALTER TABLE spans_trace_id_ts_local ON CLUSTER 'pathgrade' MODIFY TTL toDateTime(End) + INTERVAL 90 DAY;

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Checks String DEFAULT '';

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS EndState String DEFAULT '';

ALTER TABLE gate_rows ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS ThresholdFrom String DEFAULT '';

ALTER TABLE gate_rows ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS MaxRegressionFrom String DEFAULT '';

ALTER TABLE gate_rows ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Undecided UInt32 DEFAULT 0;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS SpansPartition Int32 DEFAULT -1;

ALTER TABLE alerts ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS SpansPartition Int32 DEFAULT -1;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS PartitionSeq UInt64 DEFAULT 0;

ALTER TABLE alerts ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS PartitionSeq UInt64 DEFAULT 0;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD INDEX IF NOT EXISTS idx_partition_seq PartitionSeq TYPE minmax GRANULARITY 1;

CREATE TABLE IF NOT EXISTS webhook_cursors ON CLUSTER 'pathgrade'
(
    Webhook String,
    SpansPartition Int32,
    NextSeq UInt64,
    SavedAtNs Int64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', NextSeq)
ORDER BY (Webhook, SpansPartition);

ALTER TABLE scores_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE scores ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE scores_local ON CLUSTER 'pathgrade' MATERIALIZE COLUMN StoredAt SETTINGS mutations_sync = 2;

ALTER TABLE scores_local ON CLUSTER 'pathgrade' MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE scores ON CLUSTER 'pathgrade' MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE scores_local ON CLUSTER 'pathgrade' ADD INDEX IF NOT EXISTS idx_stored_at StoredAt TYPE minmax GRANULARITY 1;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE alerts ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' MATERIALIZE COLUMN StoredAt SETTINGS mutations_sync = 2;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE alerts ON CLUSTER 'pathgrade' MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD INDEX IF NOT EXISTS idx_stored_at StoredAt TYPE minmax GRANULARITY 1;

CREATE TABLE IF NOT EXISTS export_cursors ON CLUSTER 'pathgrade'
(
    Exporter String,
    Source LowCardinality(String),
    StoredAtNs Int64,
    RowTenant String,
    RowKey String,
    SavedAtNs Int64
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}', SavedAtNs)
ORDER BY (Exporter, Source);

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS TurnSpanId String DEFAULT '';

ALTER TABLE alerts ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS TurnSpanId String DEFAULT '';

CREATE TABLE IF NOT EXISTS logs_local ON CLUSTER 'pathgrade'
(
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TimestampTime DateTime DEFAULT toDateTime(Timestamp),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    TraceFlags UInt8,
    SeverityText LowCardinality(String) CODEC(ZSTD(1)),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    Body String CODEC(ZSTD(3)),
    ResourceSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeSchemaUrl LowCardinality(String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ScopeVersion LowCardinality(String) CODEC(ZSTD(1)),
    ScopeAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    LogAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    EventName String CODEC(ZSTD(1)),
    ContentAttributes Map(LowCardinality(String), String) CODEC(ZSTD(3)),
    Tenant LowCardinality(String) CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1)),
    RecordHash UInt64,
    INDEX idx_log_attr_key mapKeys(LogAttributes) TYPE bloom_filter(0.01) GRANULARITY 1,
    INDEX idx_event_name EventName TYPE bloom_filter(0.001) GRANULARITY 1
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
PARTITION BY toDate(ReceivedAt)
ORDER BY (Tenant, TraceId, SpanId, Timestamp, RecordHash)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY
SETTINGS index_granularity = 8192;

CREATE TABLE IF NOT EXISTS logs ON CLUSTER 'pathgrade' AS logs_local
ENGINE = Distributed('pathgrade', currentDatabase(), logs_local, cityHash64(TraceId));

ALTER TABLE logs_local ON CLUSTER 'pathgrade' MODIFY COLUMN Body TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE logs_local ON CLUSTER 'pathgrade' MODIFY COLUMN ContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

CREATE TABLE IF NOT EXISTS monitor_rollups_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Source LowCardinality(String),
    Name LowCardinality(String),
    Service LowCardinality(String),
    Agent LowCardinality(String),
    Slice String,
    BucketStart DateTime('UTC'),
    Value Float64,
    Count UInt64,
    Examples Array(String)
)
ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', Count)
PARTITION BY toYYYYMM(BucketStart)
ORDER BY (Tenant, Source, Name, BucketStart, Service, Agent, Slice, Value)
TTL BucketStart + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS monitor_rollups ON CLUSTER 'pathgrade' AS monitor_rollups_local
ENGINE = Distributed('pathgrade', currentDatabase(), monitor_rollups_local, rand());

CREATE TABLE IF NOT EXISTS monitor_ticks_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Monitor LowCardinality(String),
    Kind LowCardinality(String),
    Scope String,
    Service LowCardinality(String),
    Agent LowCardinality(String),
    TickNs Int64,
    WindowStartNs Int64,
    WindowEndNs Int64,
    Figure Nullable(Float64),
    Threshold Float64,
    Low Nullable(Float64),
    High Nullable(Float64),
    Current Nullable(Float64),
    Baseline Nullable(Float64),
    Items UInt64,
    BaselineItems UInt64,
    State LowCardinality(String),
    Episode String,
    Details String
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', TickNs)
PARTITION BY toYYYYMM(fromUnixTimestamp64Nano(TickNs))
ORDER BY (Tenant, Monitor, Scope, TickNs)
TTL toDateTime(fromUnixTimestamp64Nano(TickNs)) + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS monitor_ticks ON CLUSTER 'pathgrade' AS monitor_ticks_local
ENGINE = Distributed('pathgrade', currentDatabase(), monitor_ticks_local, cityHash64(Monitor, Scope));

ALTER TABLE dataset_items ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS ReferenceContexts String DEFAULT '';

CREATE TABLE IF NOT EXISTS trace_facets_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Facet LowCardinality(String),
    Value LowCardinality(String),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, Facet, Value, Timestamp, TraceId);

CREATE TABLE IF NOT EXISTS trace_facets ON CLUSTER 'pathgrade' AS trace_facets_local
ENGINE = Distributed('pathgrade', currentDatabase(), trace_facets_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_facets_mv ON CLUSTER 'pathgrade' TO trace_facets_local AS
SELECT Tenant, facet.1 AS Facet, facet.2 AS Value, min(Timestamp) AS Timestamp, TraceId,
       max(ReceivedAt) AS ReceivedAt
FROM spans_local
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

CREATE TABLE IF NOT EXISTS conversation_traces_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    ConversationId String CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
ORDER BY (Tenant, ConversationId, TraceId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS conversation_traces ON CLUSTER 'pathgrade' AS conversation_traces_local
ENGINE = Distributed('pathgrade', currentDatabase(), conversation_traces_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS conversation_traces_mv ON CLUSTER 'pathgrade' TO conversation_traces_local AS
SELECT Tenant, GenAIConversationId AS ConversationId, TraceId, max(ReceivedAt) AS ReceivedAt
FROM spans_local
WHERE GenAIConversationId != ''
GROUP BY Tenant, ConversationId, TraceId;

INSERT INTO conversation_traces
SELECT Tenant, GenAIConversationId AS ConversationId, TraceId, max(ReceivedAt) AS ReceivedAt
FROM spans
WHERE GenAIConversationId != ''
GROUP BY Tenant, ConversationId, TraceId;

CREATE TABLE IF NOT EXISTS feedback_spans_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    Feedback String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
ORDER BY (Tenant, TraceId, SpanId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS feedback_spans ON CLUSTER 'pathgrade' AS feedback_spans_local
ENGINE = Distributed('pathgrade', currentDatabase(), feedback_spans_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS feedback_spans_mv ON CLUSTER 'pathgrade' TO feedback_spans_local AS
SELECT Tenant, TraceId, SpanId, Timestamp, ServiceName,
       SpanAttributes['pathgrade.feedback'] AS Feedback, ReceivedAt
FROM spans_local
WHERE mapContains(SpanAttributes, 'pathgrade.feedback');

INSERT INTO feedback_spans
SELECT Tenant, TraceId, SpanId, Timestamp, ServiceName,
       SpanAttributes['pathgrade.feedback'] AS Feedback, ReceivedAt
FROM spans
WHERE mapContains(SpanAttributes, 'pathgrade.feedback');

ALTER TABLE trace_roots_local ON CLUSTER 'pathgrade' MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

ALTER TABLE trace_facets_local ON CLUSTER 'pathgrade' MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS tool_spans_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    GenAIToolName LowCardinality(String),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, TraceId, SpanId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS tool_spans ON CLUSTER 'pathgrade' AS tool_spans_local
ENGINE = Distributed('pathgrade', currentDatabase(), tool_spans_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS tool_spans_mv ON CLUSTER 'pathgrade' TO tool_spans_local AS
SELECT Tenant, TraceId, SpanId, Timestamp, GenAIToolName, ReceivedAt
FROM spans_local
WHERE GenAIToolName != '';

INSERT INTO tool_spans
SELECT Tenant, TraceId, SpanId, Timestamp, GenAIToolName, ReceivedAt
FROM spans
WHERE GenAIToolName != '';

CREATE TABLE IF NOT EXISTS trace_times_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime64(9)),
    End SimpleAggregateFunction(max, DateTime64(9))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
ORDER BY (Tenant, TraceId)
TTL toDateTime(End) + INTERVAL 90 DAY
SETTINGS index_granularity = 256;

CREATE TABLE IF NOT EXISTS trace_times ON CLUSTER 'pathgrade' AS trace_times_local
ENGINE = Distributed('pathgrade', currentDatabase(), trace_times_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_times_mv ON CLUSTER 'pathgrade' TO trace_times_local AS
SELECT Tenant, TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM spans_local
GROUP BY Tenant, TraceId;

INSERT INTO trace_times
SELECT Tenant, TraceId, min(Start) AS Start, max(End) AS End
FROM spans_trace_id_ts
GROUP BY Tenant, TraceId;

DROP VIEW IF EXISTS spans_trace_id_ts_mv ON CLUSTER 'pathgrade';

DROP TABLE IF EXISTS spans_trace_id_ts ON CLUSTER 'pathgrade';

DROP TABLE IF EXISTS spans_trace_id_ts_local ON CLUSTER 'pathgrade';

CREATE TABLE IF NOT EXISTS trace_scores_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Metric LowCardinality(String),
    ScoreId String CODEC(ZSTD(1)),
    RunId LowCardinality(String),
    CreatedAt DateTime64(3) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}', CreatedAt)
ORDER BY (Tenant, TraceId, Metric, ScoreId)
SETTINGS index_granularity = 256;

CREATE TABLE IF NOT EXISTS trace_scores ON CLUSTER 'pathgrade' AS trace_scores_local
ENGINE = Distributed('pathgrade', currentDatabase(), trace_scores_local, cityHash64(TraceId));

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_scores_mv ON CLUSTER 'pathgrade' TO trace_scores_local AS
SELECT Tenant, TraceId, Metric, ScoreId, RunId, CreatedAt
FROM scores_local;

INSERT INTO trace_scores
SELECT Tenant, TraceId, Metric, ScoreId, RunId, CreatedAt
FROM scores;

CREATE TABLE IF NOT EXISTS trace_counts_local ON CLUSTER 'pathgrade'
(
    Tenant LowCardinality(String),
    Hour DateTime('UTC'),
    Traces AggregateFunction(uniqExact, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/{table}', '{replica}')
PARTITION BY toYYYYMM(Hour)
ORDER BY (Tenant, Hour)
TTL Hour + INTERVAL 90 DAY;

CREATE TABLE IF NOT EXISTS trace_counts ON CLUSTER 'pathgrade' AS trace_counts_local
ENGINE = Distributed('pathgrade', currentDatabase(), trace_counts_local, rand());

CREATE MATERIALIZED VIEW IF NOT EXISTS trace_counts_mv ON CLUSTER 'pathgrade' TO trace_counts_local AS
SELECT Tenant, toStartOfHour(toDateTime(Timestamp, 'UTC')) AS Hour,
       uniqExactState(cityHash64(TraceId)) AS Traces
FROM spans_local
WHERE ParentSpanId = ''
GROUP BY Tenant, Hour;

INSERT INTO trace_counts
SELECT Tenant, toStartOfHour(toDateTime(Timestamp, 'UTC')) AS Hour,
       uniqExactState(cityHash64(TraceId)) AS Traces
FROM trace_roots
GROUP BY Tenant, Hour;

ALTER TABLE alerts_local ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tool LowCardinality(String) DEFAULT '';

ALTER TABLE alerts ON CLUSTER 'pathgrade' ADD COLUMN IF NOT EXISTS Tool LowCardinality(String) DEFAULT '';

INSERT INTO alerts
SELECT stored.* REPLACE (tools.GenAIToolName AS Tool)
FROM (SELECT * FROM alerts FINAL WHERE SpanId != '' AND Tool = '') AS stored
INNER JOIN (
    SELECT Tenant, TraceId, SpanId, argMax(GenAIToolName, ReceivedAt) AS GenAIToolName
    FROM tool_spans
    WHERE (Tenant, TraceId, SpanId) IN (SELECT Tenant, TraceId, SpanId FROM alerts WHERE SpanId != '')
    GROUP BY Tenant, TraceId, SpanId
) AS tools
ON stored.Tenant = tools.Tenant AND stored.TraceId = tools.TraceId AND stored.SpanId = tools.SpanId;

