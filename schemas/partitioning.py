"""Which partition a keyed message goes to: Kafka's default (Java client) rule, faster.

`pathgrade.spans` is keyed by trace id so every span of a trace lands on one partition,
whoever produced it (pathgrade's collector or an OTel Collector's Kafka exporter with
`partition_traces_by_id`): partition = (murmur2(key) & 0x7fffffff) mod partition count,
the Java client's `Utils.murmur2` rule that kafka-python's DefaultPartitioner reproduces.
Its pure-Python murmur2 walks the key a byte at a time (~26 µs for a 32-byte key, a
noticeable share of the collector's and the realtime plane's CPU per message); this one
reads the key four bytes at a time through `struct` and gives the same numbers
(tests/unit/test_partitioning.py compares them on random keys of every length).
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any

from kafka.partitioner import DefaultPartitioner

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@lru_cache(maxsize=256)
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of `data` (unsigned 32-bit), as the Java client computes it."""
    length = len(data)
    h = _SEED ^ length
    body = length & ~3
    for k in _words(length >> 2).unpack_from(data):
        k = (k * _M) & _MASK
        k = ((k ^ (k >> 24)) * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    if tail:
        if tail == 3:
            h ^= data[body + 2] << 16
        if tail >= 2:
            h ^= data[body + 1] << 8
        h = ((h ^ data[body]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


class Murmur2Partitioner(DefaultPartitioner):
    """kafka-python's DefaultPartitioner with the faster murmur2 for keyed messages
    (unkeyed ones still go to a random available partition)."""

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        if serialized_key is None:
            return super().partition(topic, key, None, value, serialized_value, cluster)
        partitions = cluster.partitions_for_topic(topic)
        if not partitions:
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        ordered = sorted(partitions)
        return ordered[(murmur2(serialized_key) & 0x7FFFFFFF) % len(ordered)]
