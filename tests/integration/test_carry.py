"""Unread samples survive a swap of the bundled broker (pathgrade.stack.carry), on real brokers:
what the scorer group had not committed is back on the fresh broker, on the same
partitions and in order; what it had read is not; a group that never committed gets none."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from pathgrade.schemas.topics import SAMPLED_TOPIC, SCORER_GROUP

from pathgrade.stack.broker import LocalBroker, ensure_topics
from pathgrade.stack.carry import committed_offsets, republish, start_group, unread_messages
from tests.support.topics import read_topic_to_end

pytestmark = pytest.mark.integration


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


def test_unread_samples_are_carried_to_the_fresh_broker(broker: LocalBroker) -> None:
    bootstrap = broker.bootstrap
    produce(bootstrap, 20, [0, 1, 2])
    commit(bootstrap, SCORER_GROUP, {0: 15, 1: 20})  # partition 2: nothing committed
    unread = unread_messages(bootstrap, SAMPLED_TOPIC, SCORER_GROUP)
    broker.restart()
    ensure_topics(bootstrap)
    republish(bootstrap, SAMPLED_TOPIC, unread)
    carried = read_all(bootstrap)
    assert [v for _, v, _ in carried[0]] == [f"p0-{n}".encode() for n in range(15, 20)]
    assert 1 not in carried  # the scorer had read all of partition 1
    assert [v for _, v, _ in carried[2]] == [f"p2-{n}".encode() for n in range(20)]
    assert carried[2][3][0] == b"k3" and carried[2][3][2] == [("h", b"v")]


def test_a_group_that_never_committed_gets_nothing(broker: LocalBroker) -> None:
    produce(broker.bootstrap, 5, [0])
    assert unread_messages(broker.bootstrap, SAMPLED_TOPIC, SCORER_GROUP) == []


def test_a_second_swap_carries_what_the_scorer_still_has_not_read(broker: LocalBroker) -> None:
    """The fresh broker knows no committed offsets: the scorer group's are set to the start
    of the carried partitions, so a scorer that did not commit again before the next swap
    still gets its samples carried (not taken for one that never ran)."""
    bootstrap = broker.bootstrap
    produce(bootstrap, 6, [0, 1])
    commit(bootstrap, SCORER_GROUP, {0: 2, 1: 0})
    for _ in range(2):  # two swaps, no commit by the scorer in between
        offsets = committed_offsets(bootstrap, SAMPLED_TOPIC, SCORER_GROUP)
        unread = unread_messages(bootstrap, SAMPLED_TOPIC, SCORER_GROUP, offsets=offsets)
        broker.restart()
        ensure_topics(bootstrap)
        republish(bootstrap, SAMPLED_TOPIC, unread)
        start_group(
            bootstrap, SAMPLED_TOPIC, SCORER_GROUP, [p for p, o in offsets.items() if o is not None]
        )
    carried = read_all(bootstrap)
    assert [v for _, v, _ in carried[0]] == [f"p0-{n}".encode() for n in range(2, 6)]
    assert [v for _, v, _ in carried[1]] == [f"p1-{n}".encode() for n in range(6)]
