-- Alerts: one row per (tenant, alert key). The alert key is the finding's stable key, so a
-- re-evaluated trace, a re-read after a crash or a second consumer replaces the row rather
-- than adding one. Read through `alerts_view` (FINAL): one row per finding.
CREATE TABLE IF NOT EXISTS alerts
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
ENGINE = ReplacingMergeTree(DetectedAtNs)
ORDER BY (Tenant, AlertKey);

CREATE VIEW IF NOT EXISTS alerts_view AS SELECT * FROM alerts FINAL;
