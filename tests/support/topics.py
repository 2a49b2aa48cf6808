"""Reading a whole Kafka topic in a test, on a machine that may be loaded."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer


def read_topic(
    bootstrap: str, topic: str, quiet_s: float = 3.0, first_within_s: float = 60.0
) -> list[Any]:
    """Every message of `topic` from its start (kafka-python records): read until
    `quiet_s` bring no more once the first came. A new consumer's first fetch on a loaded
    machine can take longer than `quiet_s` (a clean-clone CI run read none in 3 s), so the
    read waits up to `first_within_s` for it; an empty topic costs that long."""
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
    )
    messages: list[Any] = []
    last_read = time.monotonic()
    try:
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
