"""At-least-once webhook delivery from the alerts table: alert numbers, delivery cursors,
and the table as the queue's backlog.

The realtime plane numbers the alerts of each partition of `pathgrade.spans` 1, 2, ... in
the order it found them and stores the number with the row (`SpansPartition`,
`PartitionSeq`); the monitors' alerts are numbered likewise in a stream of their own
(MONITOR_STREAM). Per partition the webhook keeps a cursor, the first number not yet
delivered (`PartitionProgress`), and saves it now and then in `webhook_cursors`
(`AlertBacklog.save`), never past the highest number stored: a number not stored is given
out again by the partition's next reader if this one dies. Numbers it was handed but
holds no body for (the in-memory queue was full, or a POST kept failing, or a restarted
plane found stored alerts past its saved cursor) are `missing`: they are read back from
the table (`AlertBacklog.read`) once the store has them, and delivered then. So what
reached the table reaches the webhook at least once, across restarts and overflows; a
delivery repeated after a crash (up to the last saved cursor) carries the same alert key.

Numbers go up in the order the plane's inserts are stored (one insert at a time per
plane, and a partition has one reader at a time), so a number read from the table is
never followed by a lower one appearing later; one the store refused or merged away is
passed over once the store has numbers past it.

The plane reads and writes these tables through `schemas.alert_store.AlertStore` (the
store room's `batch_plane.store.deliveries.AlertRecords`, handed in where the plane is
built): no SQL here.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from pathgrade.schemas.alert_store import AlertStore
from pathgrade.schemas.alerts import Alert

MONITOR_STREAM = -2
"""The `SpansPartition` of the monitors' alerts: numbered in a stream of their own, which
the owner of partition 0 writes and delivers (`realtime_plane.monitors`); -1 is the rows
written before alerts were numbered."""


def webhook_id(url: str) -> str:
    """The key of a webhook's cursors: a hash of its URL (credentials in it never reach the
    table; another URL starts from the alerts found after it was set)."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


@dataclass
class PartitionProgress:
    """Delivery of one partition's alerts: `cursor` is the first number not delivered
    (every lower one is, or never will be), `done` the delivered numbers above it, `missing`
    the ranges handed over without a body in memory, `stored` the highest number the
    store is known to hold."""

    cursor: int
    stored: int
    done: set[int] = field(default_factory=set)
    missing: list[list[int]] = field(default_factory=list)  # [first, last], in order

    @classmethod
    def resumed(cls, cursor: int | None, stored: int) -> PartitionProgress:
        """From a saved cursor (None: the webhook never delivered this partition, so it
        starts after what is stored) with `stored` the highest number stored."""
        start = stored + 1 if cursor is None else cursor
        progress = cls(start, stored)
        if start <= stored:
            progress.missing.append([start, stored])
        return progress

    def cursor_to_save(self) -> int:
        """The cursor to save: `cursor`, but never past the highest number stored. A plane
        that dies before storing numbers it delivered leaves them to the partition's next
        reader, which numbers its own alerts on from what the table holds (the same numbers,
        other alerts): a saved cursor past them would count those as delivered."""
        return min(self.cursor, self.stored + 1)

    def delivered(self, number: int) -> None:
        """`number` reached the webhook (or was refused for good)."""
        if number < self.cursor:
            return
        self.done.add(number)
        while self.cursor in self.done:
            self.done.discard(self.cursor)
            self.cursor += 1

    def defer(self, number: int) -> None:
        """`number` is to be read back from the table."""
        if number < self.cursor or number in self.done:
            return
        if self.missing and self.missing[-1][1] + 1 == number:
            self.missing[-1][1] = number
        else:
            self.missing.append([number, number])
            self.missing.sort()

    def next_missing(self) -> tuple[int, int] | None:
        """The oldest missing range the store already holds (cut at `stored`)."""
        if not self.missing or self.missing[0][0] > self.stored:
            return None
        first, last = self.missing[0]
        return first, min(last, self.stored)

    def refilled(self, first: int, upto: int, found: list[int]) -> None:
        """Numbers `first`..`upto` were read back from the table: those `found` are queued
        again, the others are not in the table (refused by the store, or merged into a
        later row with the same key) and count as delivered."""
        kept: list[list[int]] = []
        for low, high in self.missing:
            if high < first or low > upto:
                kept.append([low, high])
                continue
            if low < first:
                kept.append([low, first - 1])
            if high > upto:
                kept.append([upto + 1, high])
        self.missing = kept
        for number in set(range(first, upto + 1)) - set(found):
            self.delivered(number)


class AlertBacklog:
    """The alerts table seen by one webhook: its saved cursors and the stored alerts of a
    range of numbers (through the store room's `AlertStore`)."""

    def __init__(self, records: AlertStore, url: str) -> None:
        self.records = records
        self.webhook = webhook_id(url)

    def cursors(self) -> dict[int, int]:
        """Partition -> the saved cursor (first number not delivered)."""
        return self.records.webhook_cursors(self.webhook)

    def save(self, cursors: dict[int, int]) -> None:
        """Save cursors (a partition's highest saved cursor is the one that counts)."""
        self.records.save_webhook_cursors(self.webhook, cursors, time.time_ns())

    def read(self, partition: int, first: int, last: int, limit: int) -> list[tuple[int, Alert]]:
        """The stored alerts numbered `first`..`last` of `partition`, in order, at most
        `limit` (a number stored twice, by a retried insert, once)."""
        return self.records.numbered_alerts(partition, first, last, limit)
