"""Reading a whole Kafka topic in a test, on a machine that may be loaded."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition


def read_topic(
    bootstrap: str, topic: str, quiet_s: float = 3.0, first_within_s: float = 60.0
) -> list[Any]:
    """Every message of `topic` from its start (kafka-python records): read until
    `quiet_s` bring no more once the first came. A new consumer's first fetch on a loaded
    machine can take longer than `quiet_s` (a clean-clone CI run read none in 3 s), so the
    read waits up to `first_within_s` for it; an empty topic costs that long. Every
    partition is read from offset 0 (where a topic with nothing deleted starts) rather
    than from an offset the broker is asked for: after the embedded stack swapped its
    bundled broker, a reader reset to "earliest" by the broker's answer read nothing for
    a minute while the topic held hundreds of samples."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    messages: list[Any] = []
    started = last_read = time.monotonic()
    try:
        partitions = consumer.partitions_for_topic(topic)
        while not partitions and time.monotonic() - started < first_within_s:
            time.sleep(0.5)
            consumer.topics()  # refreshes the metadata
            partitions = consumer.partitions_for_topic(topic)
        assigned = [TopicPartition(topic, p) for p in sorted(partitions or ())]
        consumer.assign(assigned)
        for tp in assigned:
            consumer.seek(tp, 0)
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
