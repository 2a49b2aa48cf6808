"""Unread samples survive a swap of the bundled broker (`pathgrade.stack.carry.carry_unread`,
as the stack's swap calls it), from one real broker to a fresh one on another port: what the
scorer group had not committed is on the fresh broker, on the same partitions and in order;
what it had read is not; a group that never committed gets none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from pathgrade.schemas.topics import SAMPLED_TOPIC, SCORER_GROUP

from pathgrade.stack.broker import LocalBroker
from pathgrade.stack.carry import carry_unread, committed_offsets
from tests.integration.conftest import local_broker
from tests.support.topics import read_topic_to_end

pytestmark = pytest.mark.integration


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[Callable[[], LocalBroker]]:
    """Starts a fresh broker with pathgrade's topics on a port of its own at each call;
    all are stopped with the test."""
    with ExitStack() as stack:
        numbers = count(1)
        yield lambda: stack.enter_context(local_broker(tmp_path / f"fresh-{next(numbers)}.log"))


def produce(bootstrap: str, per_partition: int, partitions: list[int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(per_partition):
        for p in partitions:
            producer.send(SAMPLED_TOPIC, f"p{p}-{n}".encode(), f"k{n}".encode(), [("h", b"v")], p)
    producer.flush()
    producer.close()


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    consumer.commit(
        {TopicPartition(SAMPLED_TOPIC, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
    )
    consumer.close(autocommit=False)


def read_all(bootstrap: str) -> dict[int, list[tuple[bytes, bytes, list]]]:
    by_partition: dict[int, list[tuple[bytes, bytes, list]]] = {}
    for m in read_topic_to_end(bootstrap, SAMPLED_TOPIC):
        by_partition.setdefault(m.partition, []).append((m.key, m.value, list(m.headers)))
    return by_partition


def test_unread_samples_are_carried_to_the_fresh_broker(
    broker: LocalBroker, fresh_broker: Callable[[], LocalBroker]
) -> None:
    produce(broker.bootstrap, 20, [0, 1, 2])
    commit(broker.bootstrap, SCORER_GROUP, {0: 15, 1: 20})  # partition 2: nothing committed
    fresh = fresh_broker()
    assert carry_unread(broker.bootstrap, fresh.bootstrap, SAMPLED_TOPIC, SCORER_GROUP) == 25
    carried = read_all(fresh.bootstrap)
    assert [v for _, v, _ in carried[0]] == [f"p0-{n}".encode() for n in range(15, 20)]
    assert 1 not in carried  # the scorer had read all of partition 1
    assert [v for _, v, _ in carried[2]] == [f"p2-{n}".encode() for n in range(20)]
    assert carried[2][3][0] == b"k3" and carried[2][3][2] == [("h", b"v")]
    assert read_all(broker.bootstrap)[0][0][1] == b"p0-0"  # the old broker is only read


def test_a_group_that_never_committed_gets_nothing(
    broker: LocalBroker, fresh_broker: Callable[[], LocalBroker]
) -> None:
    produce(broker.bootstrap, 5, [0])
    fresh = fresh_broker()
    assert carry_unread(broker.bootstrap, fresh.bootstrap, SAMPLED_TOPIC, SCORER_GROUP) == 0
    assert read_all(fresh.bootstrap) == {}
    assert set(committed_offsets(fresh.bootstrap, SAMPLED_TOPIC, SCORER_GROUP).values()) == {None}


def test_a_second_swap_carries_what_the_scorer_still_has_not_read(
    broker: LocalBroker, fresh_broker: Callable[[], LocalBroker]
) -> None:
    """The fresh broker knows no committed offsets: the scorer group's are set to the start
    of the carried partitions, so a scorer that did not commit again before the next swap
    still gets its samples carried (not taken for one that never ran)."""
    produce(broker.bootstrap, 6, [0, 1])
    commit(broker.bootstrap, SCORER_GROUP, {0: 2, 1: 0})
    current = broker.bootstrap
    for _ in range(2):  # two swaps, no commit by the scorer in between
        fresh = fresh_broker().bootstrap
        assert carry_unread(current, fresh, SAMPLED_TOPIC, SCORER_GROUP) == 10
        current = fresh
    carried = read_all(current)
    assert [v for _, v, _ in carried[0]] == [f"p0-{n}".encode() for n in range(2, 6)]
    assert [v for _, v, _ in carried[1]] == [f"p1-{n}".encode() for n in range(6)]
    offsets = committed_offsets(current, SAMPLED_TOPIC, SCORER_GROUP)
    assert offsets[0] == offsets[1] == 0
    assert {at for p, at in offsets.items() if p > 1} == {None}
