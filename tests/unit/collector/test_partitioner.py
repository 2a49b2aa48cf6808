"""The collector's partitioner picks the partition Kafka's default partitioner picks."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2
from pathgrade.collector.partitioner import KeyHashPartitioner, murmur2


class _Cluster:
    """The part of kafka-python's ClusterMetadata a partitioner reads."""

    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        return {"spans"}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions if topic == "spans" else None

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions_for_topic(topic) or set()


def test_the_hash_is_kafkas_murmur2_for_every_length() -> None:
    rng = random.Random(7)
    for length in range(70):
        for _ in range(20):
            data = rng.randbytes(length)
            assert murmur2(data) == kafka_murmur2(data), data


@pytest.mark.parametrize("partitions", [{0}, {0, 1, 2, 3}, {5, 1, 9, 3, 7, 2, 11}])
def test_a_keyed_record_goes_where_the_default_partitioner_sends_it(partitions: set[int]) -> None:
    rng = random.Random(8)
    cluster = _Cluster(partitions)
    for _ in range(500):
        key = rng.randbytes(16).hex().encode()  # a trace id in hex, as the collector keys
        expected = DefaultPartitioner().partition("spans", key, key, None, None, cluster)
        assert KeyHashPartitioner().partition("spans", key, key, None, None, cluster) == expected


def test_an_unknown_topic_is_refused_as_the_default_partitioner_does() -> None:
    with pytest.raises(ValueError, match="other"):
        KeyHashPartitioner().partition("other", b"k", b"k", None, None, _Cluster({0}))
