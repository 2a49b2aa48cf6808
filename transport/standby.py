"""`StandbyMember`: a consumer-group member kept joined without reading, for an owner that
is about to move to another broker (the embedded stack's swap of its bundled one).

A fresh broker's first group join takes seconds (the coordinator waits for the members to
join); an owner that joins only once it left the old broker reads nothing meanwhile. A
standby member joins beforehand: it polls in a thread of its own, so it joins, rejoins
when the group rebalances and heartbeats, puts back whatever a poll returned (its read
positions go back to the first record of each partition: nothing is lost or skipped),
and notes the partitions it holds. `take()` hands the joined consumer to its owner, which
reads on from where the group starts; rebalances from then on reach the owner's own
callbacks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pathgrade.transport.consumer import Partitions, TopicConsumer

log = logging.getLogger(__name__)
STANDBY_POLL_MS = 100  # a standby poll's longest wait (it also bounds `take`'s)
RETRY_S = 0.5  # after a poll that failed


class StandbyMember:
    """The consumer `connect(on_revoked, on_assigned)` makes, kept joined by polling in a
    thread until `take()`; `revoked` and `assigned` are the owner's callbacks, called
    (instead of noting the partitions) once it took the consumer."""

    def __init__(
        self,
        connect: Callable[[Partitions, Partitions], TopicConsumer],
        revoked: Partitions,
        assigned: Partitions,
    ) -> None:
        self._owner_revoked = revoked
        self._owner_assigned = assigned
        self._lock = threading.Lock()
        self._taken = False
        self.partitions: set[int] = set()  # held now, while not taken
        self.joined = threading.Event()  # set once the group handed it partitions
        self.consumer = connect(self._revoked, self._assigned)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="standby-member", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        """Poll until stopped, seeking back to the first record of each partition a poll
        returned (the owner reads them once it took the consumer). A poll that fails is
        logged and tried again."""
        consumer = self.consumer
        while not self._stop.is_set():
            try:
                records = consumer.poll(timeout_ms=STANDBY_POLL_MS)
            except Exception as exc:  # the broker away for a moment, say
                log.warning("a standby consumer's poll failed; retrying: %s", exc)
                self._stop.wait(RETRY_S)
                continue
            if records:
                consumer.seek({
                    (partition.topic, partition.partition): messages[0].offset
                    for partition, messages in records.items() if messages
                })  # fmt: skip

    def _revoked(self, partitions: set[int]) -> None:
        with self._lock:
            if not self._taken:
                self.partitions -= partitions
                return
        self._owner_revoked(partitions)

    def _assigned(self, partitions: set[int]) -> None:
        with self._lock:
            if not self._taken:
                self.partitions |= partitions
                self.joined.set()
                return
        self._owner_assigned(partitions)

    def take(self) -> tuple[TopicConsumer, set[int]]:
        """Stop polling; the consumer and the partitions it holds, which the owner takes
        on as assigned (later rebalances call its callbacks)."""
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._taken = True
            return self.consumer, set(self.partitions)
