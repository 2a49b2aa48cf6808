"""KafkaPublisher.hold/resume on a real broker: held messages wait in the fsynced spill,
produced offsets start afresh, and resuming sends the spill on in order; the drainer
outlives the notes a full disk refuses, and writes them once it has room."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition
from pathgrade.collector.dead_letter import read_entries
from pathgrade.collector.log_trim import GroupOffsets, load_sent
from pathgrade.collector.publisher import (
    POSITION_NOTE,
    SENT_NOTE,
    KafkaPublisher,
    producer_for,
)
from pathgrade.collector.spill import OutgoingMessage, SpillFile
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.stack.broker import LocalBroker
from tests.integration.conftest import local_broker, wait_until

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


def test_the_log_keeps_what_went_to_the_old_broker_until_its_readers_read_it(
    broker: LocalBroker, tmp_path: Path
) -> None:
    """A swap moves the collector to the fresh broker before the readers finished the old
    one (`resume(keep_old=True)`): the durable log lets go of what went to the old broker
    only at `old_broker_read()`, so a crash meanwhile replays it; what goes to the fresh
    broker is kept as before, until its readers commit it."""
    spill = SpillFile(tmp_path / "spill")
    committed = GroupOffsets(broker.bootstrap, ["a-group-that-never-reads"], SPANS_TOPIC)
    publisher = KafkaPublisher(
        producer_for(broker.bootstrap, 5.0), spill, drain_backoff_s=0.2, committed=committed
    )
    publisher.start()
    try:
        with local_broker(tmp_path / "fresh.log") as fresh:
            publisher.publish(messages("a", 3))
            wait_until(lambda: not spill.pending())  # in the old broker
            old = spill.held_bytes()
            publisher.hold()
            committed.move_to(fresh.bootstrap)
            publisher.resume(producer_for(fresh.bootstrap, 5.0), keep_old=True)
            publisher.publish(messages("b", 2))
            assert topic_values(fresh.bootstrap, 2) == [b"b0", b"b1"]
            wait_until(lambda: not spill.pending())
            both = spill.held_bytes()
            assert both > old  # the old broker's part is kept with the new one's
            publisher.old_broker_read()
            assert spill.held_bytes() == both - old  # the new one's stays until committed
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


def refuse_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write of the log's notes (`spill.pos`, `spill.sent`: written aside, then
    renamed into place) fails as on a full disk until `monkeypatch.undo()`."""
    real_replace = os.replace

    def replace(source: object, target: object) -> None:
        if Path(str(target)).name in ("spill.pos", "spill.sent"):
            raise OSError(28, "No space left on device")
        real_replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", replace)


def test_the_durable_logs_drainer_outlives_notes_the_full_disk_refuses(
    broker: LocalBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 38: the drainer's note-saving step ran outside the guard that keeps it alive,
    so one ENOSPC there ended the thread and nothing more reached Kafka. Here the notes
    fail for a while: sending goes on, the stall is reported, and the note is written once
    the disk has room."""
    spill = SpillFile(tmp_path / "spill")
    committed = GroupOffsets(broker.bootstrap, ["a-group-that-never-reads"], SPANS_TOPIC)
    publisher = KafkaPublisher(
        producer_for(broker.bootstrap, 5.0), spill, drain_backoff_s=0.2, committed=committed
    )
    refuse_notes(monkeypatch)
    publisher.start()
    try:
        publisher.publish(messages("a", 3))
        wait_until(lambda: SENT_NOTE in publisher.stalls.current())
        failures = publisher.stalls.failures
        wait_until(lambda: publisher.stalls.failures > failures)  # tried again while idle
        publisher.publish(messages("b", 2))  # a drainer that died would never send these
        assert topic_values(broker.bootstrap, 5) == [b"a0", b"a1", b"a2", b"b0", b"b1"]
        assert "No space left" in publisher.stalls.current()[SENT_NOTE]
        monkeypatch.undo()
        wait_until(lambda: SENT_NOTE not in publisher.stalls.current())
        assert load_sent(spill.directory, committed.cluster_id()) is not None
    finally:
        publisher.close()
        committed.close()


def test_the_spills_position_note_is_written_once_the_disk_has_room(
    broker: LocalBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = SpillFile(tmp_path / "spill")
    publisher = KafkaPublisher(producer_for(broker.bootstrap, 5.0), spill, drain_backoff_s=0.2)
    publisher.start()
    try:
        publisher.hold()
        publisher.publish(messages("a", 3))  # spilled while held
        refuse_notes(monkeypatch)
        publisher.resume()
        assert topic_values(broker.bootstrap, 3) == [b"a0", b"a1", b"a2"]
        wait_until(lambda: POSITION_NOTE in publisher.stalls.current())
        assert not spill.pending()  # sent and let go of in memory: nothing is sent twice
        monkeypatch.undo()
        wait_until(lambda: POSITION_NOTE not in publisher.stalls.current())
        assert int((spill.directory / "spill.pos").read_text()) == spill.read_position > 0
    finally:
        publisher.close()


def test_group_offsets_are_the_lowest_commit_over_the_groups_read_in_one_request(
    broker: LocalBroker,
) -> None:
    """A partition's offset is the lowest any group committed on it; a partition some group
    has not committed on is left out (its batches are not let go)."""
    commits = {"reader-a": {0: 7, 1: 3, 2: 5}, "reader-b": {0: 4, 1: 9}}
    for group, offsets in commits.items():
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group)
        partitions = {TopicPartition(SPANS_TOPIC, p): o for p, o in offsets.items()}
        consumer.assign(list(partitions))
        consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in partitions.items()})
        consumer.close()
    committed = GroupOffsets(broker.bootstrap, list(commits), SPANS_TOPIC)
    try:
        assert committed() == {0: 4, 1: 3}
        assert committed._one_request  # the bundled broker answers for both groups at once
    finally:
        committed.close()
