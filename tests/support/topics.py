"""Reading a whole Kafka topic in a test, on a machine that may be loaded."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition


def _from_the_start(
    consumer: KafkaConsumer, topic: str, first_within_s: float
) -> list[TopicPartition]:
    """Assign every partition of `topic` to `consumer` at offset 0 (where a topic with
    nothing deleted starts) rather than at an offset the broker is asked for: after the
    embedded stack swapped its bundled broker, a reader reset to "earliest" by the broker's
    answer read nothing for a minute while the topic held hundreds of samples. Waits up to
    `first_within_s` for the topic's metadata."""
    started = time.monotonic()
    partitions = consumer.partitions_for_topic(topic)
    while not partitions and time.monotonic() - started < first_within_s:
        time.sleep(0.5)
        consumer.topics()  # refreshes the metadata
        partitions = consumer.partitions_for_topic(topic)
    assigned = [TopicPartition(topic, p) for p in sorted(partitions or ())]
    consumer.assign(assigned)
    for tp in assigned:
        consumer.seek(tp, 0)
    return assigned


def read_topic(
    bootstrap: str, topic: str, quiet_s: float = 3.0, first_within_s: float = 60.0
) -> list[Any]:
    """Every message of `topic` from its start (kafka-python records): read until
    `quiet_s` bring no more once the first came. A new consumer's first fetch on a loaded
    machine can take longer than `quiet_s` (a clean-clone CI run read none in 3 s), so the
    read waits up to `first_within_s` for it; an empty topic costs that long. To count
    what finished producers wrote, `read_topic_to_end` does not depend on timing."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    messages: list[Any] = []
    try:
        _from_the_start(consumer, topic, first_within_s)
        last_read = time.monotonic()
        while True:
            read = [m for batch in consumer.poll(timeout_ms=500).values() for m in batch]
            now = time.monotonic()
            if read:
                messages += read
                last_read = now
            elif now - last_read >= (quiet_s if messages else first_within_s):
                return messages
    finally:
        consumer.close()


def read_topic_to_end(bootstrap: str, topic: str, timeout_s: float = 120.0) -> list[Any]:
    """Every message `topic` holds when called (kafka-python records), from offset 0 of
    each partition up to its end offset then: a count that holds whatever the machine's
    load, once the producers are done. Fails when the end is not reached in `timeout_s`."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    messages: list[Any] = []
    try:
        assigned = _from_the_start(consumer, topic, timeout_s)
        ends = consumer.end_offsets(assigned)
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{topic}: {len(messages)} messages read, its end {ends} not reached "
                    f"within {timeout_s} s"
                )
            messages += [m for batch in consumer.poll(timeout_ms=500).values() for m in batch]
        return messages
    finally:
        consumer.close()
