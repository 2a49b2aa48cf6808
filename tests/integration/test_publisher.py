"""KafkaPublisher.hold/resume on a real broker: held messages wait in the fsynced spill,
produced offsets start afresh, and resuming sends the spill on in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer
from pathgrade.collector.publisher import KafkaPublisher, producer_for
from pathgrade.collector.spill import OutgoingMessage, SpillFile
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.stack.broker import LocalBroker

pytestmark = pytest.mark.integration


def messages(prefix: str, count: int) -> list[OutgoingMessage]:
    return [OutgoingMessage(b"k" * 32, f"{prefix}{i}".encode(), "t", i) for i in range(count)]


def topic_values(bootstrap: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(
        SPANS_TOPIC, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
        consumer_timeout_ms=5000, group_id=None,
    )  # fmt: skip
    values = []
    for record in consumer:
        values.append(record.value)
        if len(values) == expected:
            break
    consumer.close()
    return values


def test_hold_spills_and_resume_sends_on_in_order(broker: LocalBroker, tmp_path: Path) -> None:
    spill = SpillFile(tmp_path / "spill")
    publisher = KafkaPublisher(producer_for(broker.bootstrap, 5.0), spill, drain_backoff_s=0.2)
    publisher.start()
    try:
        publisher.publish(messages("a", 3))
        produced = publisher.hold()
        assert produced is not None and sum(produced.values()) == 3  # one partition: 0..2
        publisher.publish(messages("b", 4))
        assert spill.pending() and publisher.produced_offsets() == produced
        assert topic_values(broker.bootstrap, 7) == [b"a0", b"a1", b"a2"]

        publisher.resume()
        values = topic_values(broker.bootstrap, 7)
        assert values == [b"a0", b"a1", b"a2", b"b0", b"b1", b"b2", b"b3"]
        assert not spill.pending()
        assert sum(publisher.produced_offsets().values()) == 7

        publisher.hold()
        publisher.resume(producer_for(broker.bootstrap, 5.0))  # as after a broker swap
        assert publisher.produced_offsets() == {}  # a new broker numbers its log from 0
    finally:
        publisher.close()
