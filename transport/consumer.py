"""`TopicConsumer`: the one shape of a pathgrade consumer-group member (the store writer,
the realtime plane, the online scorer): subscribe with the group's settings (to one topic,
or to co-partitioned topics: `pathgrade.spans` and `pathgrade.logs`, range-assigned so a
member gets the same partition numbers of each), tell the
owner of rebalances, decode span messages skipping the undecodable ones and refusing the
forged ones (no or a wrong MAC under the stack's message key: `authentic`), commit only
the offsets of work the owner has stored, and run a poll loop until stopped.

The planes share it without importing each other; it reads the consumer settings of
`kafka_settings` and the topics' wire names of the bottom layer (`schemas.topics`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.future import Future
from kafka.structs import OffsetAndMetadata
from pathgrade.content.otlp import DecodeProblems, decode_kafka_message
from pathgrade.content.otlp_logs import decode_logs_kafka_message
from pathgrade.schemas.model import LogRecord, Span
from pathgrade.transport.kafka_settings import consumer_settings
from pathgrade.transport.message_auth import MessageKey
from pathgrade.transport.stalls import Backoff

log = logging.getLogger(__name__)
T = TypeVar("T")

Partitions = Callable[[set[int]], None]
"""A rebalance callback: the partition numbers revoked or assigned."""


class ForgedCount(Protocol):
    """Messages refused as not the stack's own (an owner's stats)."""

    forged_messages: int


class DecodeCounts(ForgedCount, Protocol):
    """What decoding span messages met (an owner's stats): messages skipped, spans partly
    decoded (stored without their GenAI fields: `content.otlp`), messages whose headers
    could not be read (a default tenant or receive time), forged messages refused."""

    undecodable_messages: int
    partly_decoded_spans: int
    unreadable_headers: int


def authentic(
    partition: TopicPartition, message: Any, key: MessageKey | None, counts: ForgedCount
) -> bool:
    """Whether `message` carries the stack's MAC (`transport.message_auth`; any message
    without a key); one that does not is logged and counted in `counts.forged_messages`,
    and its owner skips it (and commits past it: nothing the stack wrote is lost)."""
    if key is None or key.authentic(
        partition.topic, message.key, message.value, message.headers or ()
    ):
        return True
    counts.forged_messages += 1
    log.warning("refused a message without the stack's MAC at %s[%d] offset %d",
                partition.topic, partition.partition, message.offset)  # fmt: skip
    return False


def decode_spans(
    partition: TopicPartition, message: Any, counts: DecodeCounts, key: MessageKey | None = None
) -> list[Span]:
    """The spans of one `pathgrade.spans` message; an undecodable message is logged,
    counted in `counts.undecodable_messages` and skipped (no spans), so one bad message
    never stops a consumer; so is a forged one (`authentic`) with a key."""
    return read_message(partition, message, counts, decode_kafka_message, key) or []


def decode_records(
    partition: TopicPartition, message: Any, counts: DecodeCounts, key: MessageKey | None = None
) -> list[LogRecord]:
    """The log records of one `pathgrade.logs` message, as `decode_spans` reads spans."""
    return read_message(partition, message, counts, decode_logs_kafka_message, key) or []


def read_message(
    partition: TopicPartition,
    message: Any,
    counts: DecodeCounts,
    read: Callable[[Any, DecodeProblems], T],
    key: MessageKey | None = None,
) -> T | None:
    """`read(message, problems)`, its problems added to `counts`; None for a message it
    finds undecodable (ValueError), which is logged and counted, and, with `key`, for a
    forged one (`authentic`)."""
    if not authentic(partition, message, key, counts):
        return None
    problems = DecodeProblems()
    try:
        result: T | None = read(message, problems)
    except ValueError as exc:
        counts.undecodable_messages += 1
        log.error("skipping undecodable message at %s[%d] offset %d: %s",
                  partition.topic, partition.partition, message.offset, exc)  # fmt: skip
        result = None
    counts.partly_decoded_spans += problems.partly_decoded_spans
    counts.unreadable_headers += problems.unreadable_headers
    return result


QUIET_BEFORE_IDLE_S = 5.0
"""With `idle_fetch_wait_ms`, a consumer that read nothing for this long fetches at that
pace (`TopicConsumer.poll`)."""


class TopicConsumer:
    """A member of consumer group `group_id` reading `topic`, connected from construction
    until `close()`. `on_revoked` runs before partitions move to another member (store and
    commit what is pending there), `on_assigned` when partitions arrive, each in a thread
    of its own while the polling thread waits in `poll` or `close` (`_Rebalance`).
    `settings` are further kafka-python consumer settings. With `idle_fetch_wait_ms`, the
    broker may hold a fetch that long once nothing came for QUIET_BEFORE_IDLE_S (instead of
    the settings' `fetch_max_wait_ms`, kept while records flow; `quiet_before_idle_s`): an
    idle consumer asks a few times a second, not ten, and a broker answers a held fetch as
    soon as a record arrives."""

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        topic: str,
        session_timeout_ms: int = 6000,
        on_revoked: Partitions | None = None,
        on_assigned: Partitions | None = None,
        also: tuple[str, ...] = (),
        idle_fetch_wait_ms: int | None = None,
        quiet_before_idle_s: float = QUIET_BEFORE_IDLE_S,
        **settings: Any,
    ) -> None:
        self.topic = topic
        self._idle_fetch_wait_ms = idle_fetch_wait_ms
        self._quiet_before_idle_s = quiet_before_idle_s
        self._last_read = time.monotonic()
        self.topics = (topic, *also)
        if also:  # co-partitioned: the same numbers of every topic go to the same member
            settings.setdefault("partition_assignment_strategy", (RangePartitionAssignor,))
        self._consumer = KafkaConsumer(
            **consumer_settings(bootstrap_servers, group_id, session_timeout_ms, **settings)
        )
        self._busy_fetch_wait_ms = self.fetch_wait_ms()  # the settings', or kafka-python's
        # kafka-python's event loop (a private attribute, as of 3.0): `_Rebalance` wakes it
        # from the thread that ran the owner's callback.
        loop = self._consumer._net
        self._consumer.subscribe(
            list(self.topics), listener=_Rebalance(on_revoked, on_assigned, loop)
        )

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        """Records by partition (empty after `timeout_ms` without any)."""
        records = self._consumer.poll(timeout_ms=timeout_ms)
        if self._idle_fetch_wait_ms is not None:
            self._pace_fetches(read=bool(records))
        return records

    def fetch_wait_ms(self) -> int:
        """How long the broker may hold this consumer's next fetch."""
        return self._consumer._fetcher.config["fetch_max_wait_ms"]

    def _pace_fetches(self, read: bool) -> None:
        """The idle fetch wait once nothing was read for `quiet_before_idle_s`, the busy one
        as soon as something is. kafka-python reads the wait of each fetch it builds from
        its fetcher's settings (a private attribute, as of 3.0)."""
        now = time.monotonic()
        if read:
            self._last_read = now
        idle = now - self._last_read >= self._quiet_before_idle_s
        wait = self._idle_fetch_wait_ms if idle else self._busy_fetch_wait_ms
        self._consumer._fetcher.config["fetch_max_wait_ms"] = wait

    def commit(
        self, next_offsets: Mapping[TopicPartition, int], timeout_ms: int | None = None
    ) -> None:
        """Commit `next_offsets` (partition -> the next offset to read): call it only for
        work that is stored. With `timeout_ms`, KafkaTimeoutError when the group's
        coordinator did not take it by then (else it waits as long as that takes)."""
        self._consumer.commit(
            {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in next_offsets.items()},
            timeout_ms=timeout_ms,
        )

    def partition(self, number: int, topic: str | None = None) -> TopicPartition:
        """Partition `number` of `topic` (default: the first topic)."""
        return TopicPartition(topic or self.topic, number)

    def assignment(self) -> set[TopicPartition]:
        return self._consumer.assignment()

    def position(self, partition: TopicPartition) -> int:
        """The next offset this member reads on `partition`."""
        return self._consumer.position(partition)

    def seek(self, next_offsets: Mapping[tuple[str, int], int]) -> None:
        """Read on from `next_offsets` ((topic, partition) -> offset); only sets the read
        positions, so a rebalance callback may call it. kafka-python keeps the position of
        a partition revoked and assigned to the same member again in one rebalance: an
        owner that dropped what it held of it seeks back to its commit when it gets it
        back, or what lay between the commit and the position would never be read."""
        for (topic, number), offset in next_offsets.items():
            self._consumer.seek(TopicPartition(topic, number), offset)

    def pause(self, *partitions: TopicPartition) -> None:
        self._consumer.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._consumer.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._consumer.paused()

    def close(self) -> None:
        self._consumer.close()

    def run(
        self,
        stop: threading.Event,
        poll_once: Callable[[], Any],
        failed: Callable[[Exception], None] | None = None,
        retry: tuple[type[Exception], ...] = (),
        retry_s: float | Backoff = 1.0,
        pause_while_failing: bool = False,
        recovered: Callable[[], None] | None = None,
    ) -> None:
        """Call `poll_once` until `stop` is set. An exception of a `retry` type is handed to
        `failed` (which logs it) and retried after `retry_s` (or the `Backoff`'s growing
        wait), nothing committed; with `pause_while_failing` consumption pauses until a
        poll succeeds again, so the owner retries its pending work without reading more.
        `recovered` is called when a poll succeeds after failures."""
        failing = False
        while not stop.is_set():
            try:
                poll_once()
            except retry as exc:
                if failed is not None:
                    failed(exc)
                if pause_while_failing:
                    self.pause(*self.assignment())
                failing = True
                stop.wait(retry_s.next_s() if isinstance(retry_s, Backoff) else retry_s)
                continue
            if failing:
                failing = False
                if isinstance(retry_s, Backoff):
                    retry_s.reset()
                if recovered is not None:
                    recovered()
            if pause_while_failing and self.paused():
                self.resume(*self.paused())


class _Rebalance(AsyncConsumerRebalanceListener):
    """Hands rebalances to the owner's callbacks as partition numbers, each run in a thread
    of its own that kafka-python's IO thread awaits.

    kafka-python 3 calls a rebalance listener on its IO thread, where a blocking call of
    the owner's (`TopicConsumer.commit` waits on that very thread) raises "Cannot block on
    net.run() from the IO thread itself": a revoke could neither commit nor forget, and the
    group's rebalance failed over and over while traffic flowed. Awaited instead, the IO
    thread serves the owner's commit and the group's heartbeats while the owner stores and
    commits, and the rebalance goes on once it is done. What the owner raises is raised on
    the IO thread, as a synchronous listener's was (kafka-python logs it and the poll, or
    the close, raises)."""

    def __init__(self, revoked: Partitions | None, assigned: Partitions | None, loop: Any) -> None:
        self.revoked = revoked
        self.assigned = assigned
        self.loop = loop  # the consumer's kafka.net.selector.NetworkSelector

    # With several topics (`also`), the numbers of all of them (co-partitioned: the same).

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._owner(self.revoked, revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._owner(self.assigned, assigned)

    async def _owner(self, callback: Partitions | None, partitions: Any) -> None:
        """`callback(partition numbers)` in a thread; returns (or raises) when it did."""
        if callback is None:
            return
        numbers = {tp.partition for tp in partitions}
        done = Future()

        def work() -> None:
            failure: Exception | None = None
            try:
                callback(numbers)
            except Exception as exc:
                failure = exc

            def settle() -> None:  # on the IO thread, which resumes the awaiting listener
                if failure is None:
                    done.success(None)
                else:
                    done.failure(failure)

            self.loop.call_soon_threadsafe(settle)

        threading.Thread(target=work, name="rebalance-callback", daemon=True).start()
        await done
