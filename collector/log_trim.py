"""What the durable log may let go: batches Kafka acknowledged, once every reader group
has committed past them.

The drainer records each batch it sent as (log offset after it, partition -> offset after
its last message there). `trimmable` pops the batches, oldest first, that the lowest
committed offset of every group (`GroupOffsets`) has passed, so the log keeps exactly the
batches some reader may still need (at most one batch more than the messages themselves:
a batch goes as a whole). Both are cheap: one OffsetFetch per group per call, one deque
entry per batch.

A collector that restarts while its broker lives on (the same cluster id) need not send
again what the broker already holds: after each batch the drainer notes how far it sent
and the offsets that took (`save_sent`, in `spill.sent`), and the next collector on the
directory starts there (`load_sent`). A broker with another cluster id (a memory-only one
started anew) gets everything the log still holds.
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaAdminClient
from kafka.errors import UnsupportedVersionError
from kafka.structs import OffsetAndMetadata, TopicPartition
from pathgrade.transport.kafka_settings import kafka_client_settings


@dataclass(frozen=True, slots=True)
class SentBatch:
    end: int  # log offset after the batch
    next_offsets: dict[int, int]  # partition -> offset after its last message there


class TrimQueue:
    """Sent batches not yet committed by every reader, in log order. `epoch` counts the
    brokers they went to: committed offsets read before `everything()` (the broker
    replaced) say nothing about the batches sent after."""

    def __init__(self) -> None:
        self._sent: deque[SentBatch] = deque()
        self._lock = threading.Lock()
        self.epoch = 0

    def sent(self, end: int, next_offsets: dict[int, int]) -> None:
        with self._lock:
            self._sent.append(SentBatch(end, next_offsets))

    def waiting(self) -> bool:
        with self._lock:
            return bool(self._sent)

    def trimmable(self, committed: dict[int, int], epoch: int) -> int | None:
        """The log offset everything before which the readers committed (popping those
        batches), or None when the oldest batch is not committed yet or `committed` was
        read in an earlier `epoch` (of another broker)."""
        end = None
        with self._lock:
            if epoch != self.epoch:
                return None
            while self._sent and all(
                committed.get(partition, 0) >= offset
                for partition, offset in self._sent[0].next_offsets.items()
            ):
                end = self._sent.popleft().end
        return end

    def everything(self) -> int | None:
        """Pop every batch (their broker is gone and its readers read them all); the log
        offset after the last, None when there was none."""
        with self._lock:
            end = self._sent[-1].end if self._sent else None
            self._sent.clear()
            self.epoch += 1
        return end


SENT_FILE = "spill.sent"


def save_sent(directory: Path, cluster_id: str, batch: SentBatch) -> None:
    """Note that the log was sent up to `batch.end` into cluster `cluster_id`, with the
    offsets after it (not fsynced: a note lost in a crash only costs a resend)."""
    note = {"cluster": cluster_id, "end": batch.end, "offsets": batch.next_offsets}
    tmp = directory / (SENT_FILE + ".tmp")
    tmp.write_text(json.dumps(note))
    os.replace(tmp, directory / SENT_FILE)


def load_sent(directory: Path, cluster_id: str) -> SentBatch | None:
    """The last note of `save_sent` if it was about cluster `cluster_id`, else None."""
    try:
        note = json.loads((directory / SENT_FILE).read_text())
        if note["cluster"] != cluster_id or not cluster_id:
            return None
        offsets = {int(p): int(o) for p, o in note["offsets"].items()}
        return SentBatch(int(note["end"]), offsets)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


class GroupOffsets:
    """The committed offsets of consumer `groups` on `topic`: per partition the lowest over
    the groups (a partition some group has not committed on is left out)."""

    def __init__(self, bootstrap_servers: str, groups: list[str], topic: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.groups = groups
        self.topic = topic
        self._admin: KafkaAdminClient | None = None
        self._one_request = len(groups) > 1  # until the broker refuses it (`_committed`)

    def move_to(self, bootstrap_servers: str) -> None:
        """Ask the broker at `bootstrap_servers` from now on (a replaced one)."""
        self.close()
        self.bootstrap_servers = bootstrap_servers

    def _client(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(
                **kafka_client_settings(self.bootstrap_servers), request_timeout_ms=5000
            )
        return self._admin

    def cluster_id(self) -> str:
        """The cluster's id; raises when the broker does not answer."""
        try:
            return str(self._client().describe_cluster()["cluster_id"] or "")
        except Exception:
            self.close()
            raise

    def __call__(self) -> dict[int, int]:
        """Raises KafkaError when the broker does not answer (the client is made anew on
        the next call)."""
        try:
            committed = self._committed()
            lowest: dict[int, int] | None = None
            for group in self.groups:
                offsets = {
                    tp.partition: meta.offset
                    for tp, meta in committed[group].items()
                    if tp.topic == self.topic and meta.offset >= 0
                }
                lowest = offsets if lowest is None else {
                    p: min(o, offsets[p]) for p, o in lowest.items() if p in offsets
                }  # fmt: skip
            return lowest or {}
        except Exception:
            self.close()
            raise

    def _committed(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """Every group's commits in one OffsetFetch (Kafka 3.0+, Tansu), or one per group
        where the broker is older: the trimmer asks every second while batches wait."""
        admin = self._client()
        if self._one_request:
            try:
                return admin.list_group_offsets(self.groups)
            except UnsupportedVersionError:
                self._one_request = False
        return {group: admin.list_group_offsets(group)[group] for group in self.groups}

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
