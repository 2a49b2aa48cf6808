-- Log records (issue 40: GenAI events as OTLP log records, pathgrade.logs): the OpenTelemetry
-- Collector's otel_logs columns (its ClickHouse exporter's table, so Grafana's log views read
-- it as is), plus the tenant, when the collector received the record, its captured content
-- apart (ContentAttributes: content keys, schemas.genai.is_content_key; Body: a record's
-- body is content) so a column TTL clears it as for spans, and RecordHash (of the record as
-- forwarded) so a record read twice leaves one row after merges (ReplacingMergeTree; query
-- with FINAL where duplicates matter). Sorted by trace and span: the trace page reads a
-- trace's records beside its spans. Retention as for spans (migration 0010, `pathgrade
-- migrate --content-retention-days N --retention-days M`).
CREATE TABLE IF NOT EXISTS logs
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
ENGINE = ReplacingMergeTree(ReceivedAt)
PARTITION BY toDate(ReceivedAt)
ORDER BY (Tenant, TraceId, SpanId, Timestamp, RecordHash)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY
SETTINGS index_granularity = 8192;

ALTER TABLE logs MODIFY COLUMN Body TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE logs MODIFY COLUMN ContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;
