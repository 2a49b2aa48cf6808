-- Evaluation results out (batch_plane/export/, docs/stack.md "Evaluation results out"): the
-- OTLP exporter reads the scores and alerts stored after its cursor, so each row carries
-- when the store took it. StoredAt is the server's clock at the insert (every row of one
-- insert gets the same value); a row's duplicates keep their own. Rows stored before this
-- migration read as the epoch: they are never exported (an exporter starts from the rows
-- stored after it was first set). The column is added with the epoch as its default and
-- written into the existing parts before the default becomes now64(9): a default is
-- computed at read time for parts that lack the column.
ALTER TABLE scores ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE scores MATERIALIZE COLUMN StoredAt SETTINGS mutations_sync = 2;

ALTER TABLE scores MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE scores ADD INDEX IF NOT EXISTS idx_stored_at StoredAt TYPE minmax GRANULARITY 1;

ALTER TABLE alerts ADD COLUMN IF NOT EXISTS StoredAt DateTime64(9) DEFAULT toDateTime64(0, 9);

ALTER TABLE alerts MATERIALIZE COLUMN StoredAt SETTINGS mutations_sync = 2;

ALTER TABLE alerts MODIFY COLUMN StoredAt DateTime64(9) DEFAULT now64(9);

ALTER TABLE alerts ADD INDEX IF NOT EXISTS idx_stored_at StoredAt TYPE minmax GRANULARITY 1;

-- Each exporter's cursor per source table: the last row it delivered (its StoredAt, tenant
-- and key), in the order (StoredAt, Tenant, key) it reads them. Exporter is a hash of the
-- endpoint URL and the tenants it exports (credentials never reach the table); a source's
-- furthest cursor is the one that counts.
CREATE TABLE IF NOT EXISTS export_cursors
(
    Exporter String,
    Source LowCardinality(String),
    StoredAtNs Int64,
    RowTenant String,
    RowKey String,
    SavedAtNs Int64
)
ENGINE = ReplacingMergeTree(SavedAtNs)
ORDER BY (Exporter, Source);
