"""KafkaPublisher.hold/resume on a real broker: held messages wait in the fsynced spill,
produced offsets start afresh, and resuming sends the spill on in order."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaConsumer
from pathgrade.collector.dead_letter import read_entries
from pathgrade.collector.publisher import KafkaPublisher, producer_for
from pathgrade.collector.spill import OutgoingMessage, SpillFile
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.stack.broker import LocalBroker
from tests.integration.conftest import wait_until

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


def test_a_message_kafka_refuses_is_reported_live_and_dead_lettered_from_the_spill(
    broker: LocalBroker, tmp_path: Path
) -> None:
    """A producer whose request size is below a message's: refused for what it is, so it
    is neither acknowledged nor spilled when live; when it was spilled (here: while held),
    the drainer moves it to the dead-letter file and sends the rest in order."""
    spill = SpillFile(tmp_path / "spill")
    producer = producer_for(broker.bootstrap, 5.0, max_request_size=64 * 1024)
    publisher = KafkaPublisher(producer, spill, drain_backoff_s=0.2)
    publisher.start()
    big = OutgoingMessage(b"k" * 32, b"x" * 100_000, "t", 0)
    try:
        refused = publisher.publish([*messages("a", 2), big, *messages("b", 1)])
        assert list(refused) == [2]
        assert "MessageSizeTooLargeError" in refused[2] and "max_message_bytes" in refused[2]
        assert not spill.pending()

        publisher.hold()
        publisher.publish([*messages("c", 1), big, *messages("d", 1)])
        assert spill.pending()
        publisher.resume()
        values = topic_values(broker.bootstrap, 5)
        assert values == [b"a0", b"a1", b"b0", b"c0", b"d0"]
        wait_until(lambda: not spill.pending())
        assert publisher.dead_letters.entries == 1
        (entry,) = read_entries(publisher.dead_letters.path)
        assert entry.message() == big and "MessageSizeTooLargeError" in entry.reason
    finally:
        publisher.close()
