-- Webhook delivery, at least once from the alerts table (realtime_plane/delivery.py): the
-- realtime plane numbers the alerts of each partition of pathgrade.spans 1, 2, ... in the
-- order it found them (SpansPartition, PartitionSeq; -1 and 0 for rows written before),
-- and each webhook's delivery cursor per partition (the first number not yet delivered) is
-- kept in webhook_cursors, so a restarted plane delivers what was stored and not
-- delivered, and an overflowing queue reads its alerts back from the table.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS SpansPartition Int32 DEFAULT -1;

ALTER TABLE alerts ADD COLUMN IF NOT EXISTS PartitionSeq UInt64 DEFAULT 0;

ALTER TABLE alerts ADD INDEX IF NOT EXISTS idx_partition_seq PartitionSeq TYPE minmax GRANULARITY 1;

CREATE TABLE IF NOT EXISTS webhook_cursors
(
    Webhook String,
    SpansPartition Int32,
    NextSeq UInt64,
    SavedAtNs Int64
)
ENGINE = ReplacingMergeTree(NextSeq)
ORDER BY (Webhook, SpansPartition);
