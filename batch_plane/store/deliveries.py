"""Typed queries of the realtime plane's tables: its numbered alerts (`alerts`, numbered per
partition of `pathgrade.spans` in `SpansPartition`, `PartitionSeq`), the webhook's delivery
cursors (`webhook_cursors`) and the turn rollups it writes (`monitor_rollups`).

`AlertRecords` is what the plane reads and writes through (its `schemas.alert_store.AlertStore`
protocol, handed in by whoever builds the plane): the plane never writes SQL for them.
"""

from __future__ import annotations

from typing import Any

from pathgrade.schemas.alerts import ALERT_COLUMNS, SEQ_COLUMNS, Alert
from pathgrade.schemas.rollups import ROLLUP_COLUMNS
from pathgrade.schemas.store import RejectedRow, Store

NUMBERED_COLUMNS = [*ALERT_COLUMNS, *SEQ_COLUMNS]
"""The columns of a numbered alert's row."""
CURSOR_COLUMNS = ["Webhook", "SpansPartition", "NextSeq", "SavedAtNs"]
"""The columns of table `webhook_cursors`."""


class AlertRecords:
    """The realtime plane's alerts, webhook cursors and turn rollups over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def latest_numbers(self) -> dict[int, int]:
        """Partition (or stream) -> the highest alert number stored for it (the rows
        written before alerts were numbered, partition -1, left out)."""
        result = self.store.query(
            "SELECT SpansPartition, max(PartitionSeq) FROM alerts WHERE SpansPartition != -1 "
            "GROUP BY SpansPartition",
            readonly=True,
        )
        return {int(partition): int(number) for partition, number in result.rows}

    def alerted_since(self, partitions: set[int], since_ns: int) -> dict[tuple[str, str], set[str]]:
        """(tenant, trace id) -> the keys of the alerts stored for `partitions` found at or
        after `since_ns`: what an earlier reader of the partitions already alerted."""
        result = self.store.query(
            "SELECT Tenant, TraceId, AlertKey FROM alerts "
            "WHERE SpansPartition IN {partitions:Array(Int32)} AND DetectedAtNs >= {since:Int64}",
            {"partitions": sorted(partitions), "since": since_ns},
            readonly=True,
        )
        out: dict[tuple[str, str], set[str]] = {}
        for tenant, trace_id, key in result.rows:
            out.setdefault((tenant, trace_id), set()).add(key)
        return out

    def numbered_alerts(
        self, partition: int, first: int, last: int, limit: int
    ) -> list[tuple[int, Alert]]:
        """The stored alerts numbered `first`..`last` of `partition`, in order, at most
        `limit` (a number stored twice, by a retried insert, once)."""
        result = self.store.query(
            f"SELECT PartitionSeq, {', '.join(ALERT_COLUMNS)} FROM alerts "
            "WHERE SpansPartition = {partition:Int32} "
            "AND PartitionSeq BETWEEN {first:UInt64} AND {last:UInt64} "
            "ORDER BY PartitionSeq LIMIT 1 BY PartitionSeq LIMIT {limit:UInt32}",
            {"partition": partition, "first": first, "last": last, "limit": limit},
            readonly=True,
        )
        return [(int(row[0]), Alert.from_row(row[1:])) for row in result.rows]

    def insert_alerts(self, rows: list[list[Any]]) -> None:
        """Store numbered alert rows (ALERT_COLUMNS + SEQ_COLUMNS order); a row the store
        refuses fails the insert."""
        self.store.insert("alerts", rows, NUMBERED_COLUMNS)

    def insert_encodable_alerts(self, rows: list[list[Any]]) -> list[RejectedRow]:
        """Store numbered alert rows but those the store cannot encode (it halves the batch
        to find them), which it returns with its reasons."""
        return self.store.insert_encodable("alerts", rows, NUMBERED_COLUMNS)

    def insert_rollups(self, rows: list[list[Any]]) -> None:
        """Store rows of `monitor_rollups` (ROLLUP_COLUMNS order)."""
        self.store.insert("monitor_rollups", rows, list(ROLLUP_COLUMNS))

    def webhook_cursors(self, webhook: str) -> dict[int, int]:
        """Partition -> the highest cursor saved for `webhook` (its id: the first number
        not delivered)."""
        result = self.store.query(
            "SELECT SpansPartition, max(NextSeq) FROM webhook_cursors "
            "WHERE Webhook = {webhook:String} GROUP BY SpansPartition",
            {"webhook": webhook},
            readonly=True,
        )
        return {int(partition): int(cursor) for partition, cursor in result.rows}

    def save_webhook_cursors(self, webhook: str, cursors: dict[int, int], saved_at_ns: int) -> None:
        """Save `webhook`'s cursors (a partition's highest saved cursor is the one that
        counts)."""
        if cursors:
            rows = [[webhook, p, cursor, saved_at_ns] for p, cursor in sorted(cursors.items())]
            self.store.insert("webhook_cursors", rows, CURSOR_COLUMNS)
