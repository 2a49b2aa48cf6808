"""Carry a consumer group's unread messages across a swap of the bundled broker.

The bundled broker keeps its data in memory only, so swapping it for a fresh one (past
`--broker-max-mb`) ends every topic. The stack's own readers of `pathgrade.spans` are
drained to the end first; `pathgrade.sampled` is read by a separate process, the online
scorer (group `pathgrade-scorer`), which may be behind. Its unread samples are read from
the old broker (`unread_messages`: from the group's committed offset of each partition,
or the partition's start where it committed none) and written into the fresh one
(`republish`) on the same partitions, in order, before the stack resumes. The fresh broker
knows no committed offsets, so the group's are set to the start of each partition it had
committed on (`start_group`), which holds exactly what it had not read yet (a sample it
read but had not committed is read twice: at-least-once, as everywhere in pathgrade);
without that, a scorer that had not committed again by the next swap would look like one
that never ran, and that swap would carry nothing. A group that never committed anything
(no scorer ever ran) has nothing carried: nobody would read it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from pathgrade.transport.drain import DRAIN_IDLE_S, read_until_drained
from pathgrade.transport.kafka_settings import kafka_client_settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CarriedMessage:
    partition: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


def committed_offsets(bootstrap: str, topic: str, group: str) -> dict[int, int | None]:
    """Partition -> the group's committed offset on `topic` (None where it has none)."""
    consumer = KafkaConsumer(**kafka_client_settings(bootstrap), group_id=group)
    try:
        partitions = sorted(consumer.partitions_for_topic(topic) or ())
        return {p: consumer.committed(TopicPartition(topic, p)) for p in partitions}
    finally:
        consumer.close(autocommit=False)


def unread_messages(
    bootstrap: str, topic: str, group: str, timeout_s: float = 60.0,
    offsets: dict[int, int | None] | None = None,
) -> list[CarriedMessage]:  # fmt: skip
    """What `group` has not committed on `topic` (`offsets`: its committed offsets, when
    already read), read until the topic is quiet for `DRAIN_IDLE_S`; empty when the group
    committed nothing at all."""
    if offsets is None:
        offsets = committed_offsets(bootstrap, topic, group)
    if all(offset is None for offset in offsets.values()):
        return []
    reader = KafkaConsumer(
        **kafka_client_settings(bootstrap), group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    carried: list[CarriedMessage] = []
    try:
        assigned = [TopicPartition(topic, p) for p in offsets]
        reader.assign(assigned)
        for tp in assigned:
            if offsets[tp.partition] is None:
                reader.seek_to_beginning(tp)
            else:
                reader.seek(tp, offsets[tp.partition])

        def poll() -> int:
            records = reader.poll(timeout_ms=200)
            for batch in records.values():
                carried.extend(
                    CarriedMessage(m.partition, m.key, m.value, list(m.headers or ()))
                    for m in batch
                )
            return sum(map(len, records.values()))

        read_until_drained(poll, lambda: True, timeout_s, idle_s=DRAIN_IDLE_S)
    finally:
        reader.close()
    return carried


def republish(
    bootstrap: str, topic: str, messages: list[CarriedMessage], timeout_s: float = 60.0
) -> None:
    """Write `messages` into `topic` on their partitions, in order; raises KafkaError
    when the broker does not acknowledge them within `timeout_s`."""
    if not messages:
        return
    producer = KafkaProducer(
        **kafka_client_settings(bootstrap), acks="all", linger_ms=5,
        max_in_flight_requests_per_connection=1,  # a retry must not reorder a partition
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        futures = [
            producer.send(topic, m.value, m.key, m.headers or None, m.partition) for m in messages
        ]
        producer.flush(timeout=max(0.0, deadline - time.monotonic()))
        for future in futures:
            future.get(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        producer.close()


def start_group(bootstrap: str, topic: str, group: str, partitions: list[int]) -> None:
    """Commit offset 0 for `group` on `partitions` of `topic` (on a fresh broker: it has
    read nothing of what was carried there)."""
    if not partitions:
        return
    consumer = KafkaConsumer(**kafka_client_settings(bootstrap), group_id=group)
    try:
        consumer.commit(
            {TopicPartition(topic, p): OffsetAndMetadata(0, "", -1) for p in partitions}
        )
    finally:
        consumer.close(autocommit=False)


def carry_unread(old: str, fresh: str, topic: str, group: str) -> int:
    """Carry what `group` has not committed on `topic` at the broker `old` into the broker
    at `fresh`, on the same partitions and in order, and start the group there
    (`start_group`); returns how many messages were carried. What Kafka does not give or
    take is logged as lost, not raised: a swap goes on without it."""
    unread: list[CarriedMessage] = []
    try:
        offsets = committed_offsets(old, topic, group)
        unread = unread_messages(old, topic, group, offsets=offsets)
        republish(fresh, topic, unread)
        start_group(fresh, topic, group, [p for p, at in offsets.items() if at is not None])
    except KafkaError as exc:
        log.error("unread messages of %s on %s were lost in the broker swap (%d read): %s",
                  group, topic, len(unread), exc)  # fmt: skip
    return len(unread)
