"""TrimQueue: the durable log lets a sent batch go only once every reader committed past
each of its partitions, oldest batch first; GroupOffsets reads the readers' commits."""

from __future__ import annotations

from typing import Any

from kafka.errors import UnsupportedVersionError
from kafka.structs import OffsetAndMetadata, TopicPartition
from pathgrade.collector.log_trim import GroupOffsets, TrimQueue


def test_a_batch_goes_once_committed_on_every_partition_it_touched() -> None:
    trim = TrimQueue()
    trim.sent(100, {0: 5, 1: 3})
    trim.sent(250, {1: 4})
    assert trim.trimmable({}, trim.epoch) is None
    assert trim.trimmable({0: 5, 1: 2}, trim.epoch) is None  # partition 1 not past offset 2 yet
    assert trim.trimmable({0: 5, 1: 3}, trim.epoch) == 100
    assert trim.waiting()
    assert trim.trimmable({0: 5, 1: 3}, trim.epoch) is None  # the second: offset 3 of partition 1
    assert trim.trimmable({1: 9}, trim.epoch) == 250
    assert not trim.waiting()


def test_a_later_batch_committed_first_waits_for_the_older_one() -> None:
    trim = TrimQueue()
    trim.sent(10, {0: 8})
    trim.sent(20, {1: 1})
    assert trim.trimmable({1: 1}, trim.epoch) is None  # the log is cut at a prefix only
    assert trim.trimmable({0: 8, 1: 1}, trim.epoch) == 20


def test_a_batch_of_nothing_sent_goes_at_once_and_everything_empties_it() -> None:
    trim = TrimQueue()
    trim.sent(30, {})  # only dead-lettered frames
    assert trim.trimmable({}, trim.epoch) == 30
    trim.sent(40, {2: 1})
    trim.sent(50, {3: 7})
    assert trim.everything() == 50
    assert trim.everything() is None and not trim.waiting()


def test_offsets_read_before_the_broker_was_replaced_let_nothing_go() -> None:
    """Committed offsets of the old broker, read just before `everything()`, say nothing
    about the batches sent to the new one, which numbers its offsets from 0 again."""
    trim = TrimQueue()
    trim.sent(60, {0: 900})
    epoch = trim.epoch  # the trimmer reads the committed offsets now ...
    assert trim.everything() == 60  # ... the broker is replaced meanwhile ...
    trim.sent(70, {0: 3})  # ... and the log sent to the new one
    assert trim.trimmable({0: 900}, epoch) is None
    assert trim.waiting()
    assert trim.trimmable({0: 3}, trim.epoch) == 70


class OldBrokerAdmin:
    """Stands in for the admin client of a broker older than Kafka 3.0, which reads one
    group's commits per OffsetFetch; records what it was asked."""

    def __init__(self, commits: dict[str, dict[int, int]]) -> None:
        self.commits = commits
        self.asked: list[Any] = []

    def list_group_offsets(self, groups: str | list[str]) -> dict[str, Any]:
        self.asked.append(groups)
        if isinstance(groups, list):
            raise UnsupportedVersionError("OffsetFetch v8 needed for several groups")
        return {
            groups: {
                TopicPartition("t", p): OffsetAndMetadata(o, "", -1)
                for p, o in self.commits[groups].items()
            }
        }

    def close(self) -> None:
        pass


def test_an_older_broker_is_asked_one_group_at_a_time_from_its_first_refusal_on() -> None:
    admin = OldBrokerAdmin({"a": {0: 5, 1: 2}, "b": {0: 2}})
    committed = GroupOffsets("127.0.0.1:1", ["a", "b"], "t")
    committed._admin = admin  # type: ignore[assignment]
    assert committed() == {0: 2}
    assert committed() == {0: 2}
    assert admin.asked == [["a", "b"], "a", "b", "a", "b"]
