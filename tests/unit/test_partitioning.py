"""The faster murmur2 partitioner puts every key where kafka-python's (the Java rule) does."""

from __future__ import annotations

import random

from kafka.partitioner import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2

from schemas.partitioning import Murmur2Partitioner, murmur2


class Cluster:
    """The two ClusterMetadata calls a partitioner makes."""

    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


def test_murmur2_equals_kafka_python_on_keys_of_every_length() -> None:
    rng = random.Random(5)
    for length in range(0, 80):
        for _ in range(50):
            key = rng.randbytes(length)
            assert murmur2(key) == kafka_murmur2(key), key


def test_known_java_client_values() -> None:
    # Kafka's Java client: Utils.murmur2("21".getBytes()) == -973932308 (signed).
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF


def test_partition_of_trace_keys_equals_the_default_partitioner() -> None:
    rng = random.Random(9)
    ours, default = Murmur2Partitioner(), DefaultPartitioner()
    for partitions in ({0}, {0, 1, 2}, set(range(12)), {0, 2, 5, 7}):
        cluster = Cluster(partitions)
        for _ in range(300):
            key = rng.randbytes(16).hex().encode()
            assert ours.partition("t", key, key, b"", b"", cluster) == default.partition(
                "t", key, key, b"", b"", cluster
            )
        assert ours.partition("t", None, None, b"", b"", cluster) in partitions
