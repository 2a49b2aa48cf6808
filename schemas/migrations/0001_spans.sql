-- Spans: a superset of the OpenTelemetry Collector's otel_traces columns, plus typed GenAI
-- columns, the tenant and pathgrade's evaluation context. ReplacingMergeTree keyed on
-- (Tenant, TraceId, SpanId): the same span loaded twice leaves one row after merges (query
-- with FINAL where duplicates matter). The sort key doubles as the trace-id lookup path.
CREATE TABLE IF NOT EXISTS spans
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
ENGINE = ReplacingMergeTree(ReceivedAt)
PARTITION BY toDate(Timestamp)
ORDER BY (Tenant, TraceId, SpanId)
SETTINGS index_granularity = 8192;

-- Trace-id -> time range, as the OTel Collector's otel_traces_trace_id_ts: lets a trace
-- lookup prune partitions by date.
CREATE TABLE IF NOT EXISTS spans_trace_id_ts
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    Start SimpleAggregateFunction(min, DateTime64(9)),
    End SimpleAggregateFunction(max, DateTime64(9))
)
ENGINE = AggregatingMergeTree
ORDER BY (Tenant, TraceId);

CREATE MATERIALIZED VIEW IF NOT EXISTS spans_trace_id_ts_mv TO spans_trace_id_ts AS
SELECT Tenant, TraceId, min(Timestamp) AS Start, max(Timestamp) AS End
FROM spans
GROUP BY Tenant, TraceId;
