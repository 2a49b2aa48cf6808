"""TrimQueue: the durable log lets a sent batch go only once every reader committed past
each of its partitions, oldest batch first."""

from __future__ import annotations

from pathgrade.collector.log_trim import TrimQueue


def test_a_batch_goes_once_committed_on_every_partition_it_touched() -> None:
    trim = TrimQueue()
    trim.sent(100, {0: 5, 1: 3})
    trim.sent(250, {1: 4})
    assert trim.trimmable({}) is None
    assert trim.trimmable({0: 5, 1: 2}) is None  # partition 1 not past offset 2 yet
    assert trim.trimmable({0: 5, 1: 3}) == 100
    assert trim.waiting()
    assert trim.trimmable({0: 5, 1: 3}) is None  # the second needs offset 3 of partition 1
    assert trim.trimmable({1: 9}) == 250
    assert not trim.waiting()


def test_a_later_batch_committed_first_waits_for_the_older_one() -> None:
    trim = TrimQueue()
    trim.sent(10, {0: 8})
    trim.sent(20, {1: 1})
    assert trim.trimmable({1: 1}) is None  # the log is cut at a prefix only
    assert trim.trimmable({0: 8, 1: 1}) == 20


def test_a_batch_of_nothing_sent_goes_at_once_and_everything_empties_it() -> None:
    trim = TrimQueue()
    trim.sent(30, {})  # only dead-lettered frames
    assert trim.trimmable({}) == 30
    trim.sent(40, {2: 1})
    trim.sent(50, {3: 7})
    assert trim.everything() == 50
    assert trim.everything() is None and not trim.waiting()
