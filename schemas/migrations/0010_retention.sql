-- Retention (issue 16): captured content is kept briefly, the span rows and their facts
-- (the pathgrade.facts.* attributes in SpanAttributes) much longer.
-- Content keys (schemas.genai.is_content_key: tool arguments and results, messages, the
-- session identity, a confirmed action) move out of SpanAttributes / Events.Attributes
-- into their own columns, so a column TTL can clear them without touching the facts.
-- Defaults: content 7 days, rows 90 days from when the collector received the span (not
-- its start: backfilled or replayed spans count from their arrival); `pathgrade migrate
-- --content-retention-days N --retention-days M` (or `pathgrade up` with the same flags)
-- sets other values (schemas.migrations.retention_ddl, the same statements).
ALTER TABLE spans ADD COLUMN IF NOT EXISTS ContentAttributes Map(LowCardinality(String), String) CODEC(ZSTD(3)) AFTER SpanAttributes;

ALTER TABLE spans ADD COLUMN IF NOT EXISTS EventContentAttributes Array(Map(LowCardinality(String), String)) CODEC(ZSTD(3));

ALTER TABLE spans MODIFY COLUMN ContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY COLUMN EventContentAttributes TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY COLUMN GenAIToolArguments TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY COLUMN GenAIToolResult TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY COLUMN GenAIInputMessages TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY COLUMN GenAIOutputMessages TTL toDateTime(ReceivedAt) + INTERVAL 7 DAY;

ALTER TABLE spans MODIFY TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

ALTER TABLE spans_trace_id_ts MODIFY TTL toDateTime(End) + INTERVAL 90 DAY;
