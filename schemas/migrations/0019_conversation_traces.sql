-- What the conversation page reads (batch_plane/store/conversations.py): per tenant and
-- conversation, the traces with a span of that conversation, sorted by (Tenant,
-- ConversationId, TraceId), so the page finds a conversation's traces by key instead of
-- reading `spans` (sorted by trace id) for them. Filled by a materialized view on every
-- insert into `spans`, and once from the spans already stored. ReplacingMergeTree: a
-- replayed block leaves one row after merges. Kept as long as the latest such span
-- (`ReceivedAt`, as the spans' own TTL; `pathgrade migrate --retention-days` sets both).
CREATE TABLE IF NOT EXISTS conversation_traces
(
    Tenant LowCardinality(String),
    ConversationId String CODEC(ZSTD(1)),
    TraceId String CODEC(ZSTD(1)),
    ReceivedAt DateTime64(9) CODEC(Delta, ZSTD(1))
)
ENGINE = ReplacingMergeTree(ReceivedAt)
ORDER BY (Tenant, ConversationId, TraceId)
TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY;

CREATE MATERIALIZED VIEW IF NOT EXISTS conversation_traces_mv TO conversation_traces AS
SELECT Tenant, GenAIConversationId AS ConversationId, TraceId, max(ReceivedAt) AS ReceivedAt
FROM spans
WHERE GenAIConversationId != ''
GROUP BY Tenant, ConversationId, TraceId;

INSERT INTO conversation_traces
SELECT Tenant, GenAIConversationId AS ConversationId, TraceId, max(ReceivedAt) AS ReceivedAt
FROM spans
WHERE GenAIConversationId != ''
GROUP BY Tenant, ConversationId, TraceId;
