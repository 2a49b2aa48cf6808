-- What the review queue reads (batch_plane/store/review.py): the spans carrying the user's
-- feedback (`pathgrade.feedback` in SpanAttributes, schemas.genai.PG_FEEDBACK), with the
-- feedback's value, so the queue finds the traces with negative feedback without reading
-- every span's attributes. Filled by a materialized view on every insert into `spans`, and
-- once from the spans already stored. ReplacingMergeTree on the spans' own key: a replayed
-- span leaves one row after merges (the queue groups per trace, so a copy changes nothing
-- before). Kept as long as the spans (`ReceivedAt`; `pathgrade migrate --retention-days`
-- sets both).
CREATE TABLE IF NOT EXISTS feedback_spans
(
    Tenant LowCardinality(String),
    TraceId String CODEC(ZSTD(1)),
    SpanId String CODEC(ZSTD(1)),
    Timestamp DateTime64(9) CODEC(Delta, ZSTD(1)),
    ServiceName LowCardinality(String),
    Feedback String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(ReceivedAt)
ORDER BY (Tenant, TraceId, SpanId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS feedback_spans_mv TO feedback_spans AS
SELECT Tenant, TraceId, SpanId, Timestamp, ServiceName,
       SpanAttributes['pathgrade.feedback'] AS Feedback, ReceivedAt
FROM spans
WHERE mapContains(SpanAttributes, 'pathgrade.feedback');

INSERT INTO feedback_spans
SELECT Tenant, TraceId, SpanId, Timestamp, ServiceName,
       SpanAttributes['pathgrade.feedback'] AS Feedback, ReceivedAt
FROM spans
WHERE mapContains(SpanAttributes, 'pathgrade.feedback');
