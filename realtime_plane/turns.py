"""Conversation history shared by the consumers of one group, through `pathgrade.turns`.

The turns of a conversation are separate traces, keyed by trace id, so they land on
different partitions of `pathgrade.spans` and, with several consumers in the group, on
different consumers. Each consumer publishes the digest of every conversation turn it
evaluated (`schemas.turns.TurnDigest`: what later turns' detectors read), gathered into
one message per publish interval (`schemas.turns.TurnBatch`, at most MAX_BATCH_BYTES),
and reads every partition of the topic without a group. A turn evaluated less than a
publish plus a read interval before the next turn of its conversation is evaluated
elsewhere can be missed; turns of one conversation are normally seconds apart (a user
answers), and each waits its quiet window.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from pathgrade.schemas.topics import WORKER_HEADER
from pathgrade.schemas.turns import TurnBatch, TurnDigest
from pathgrade.transport.consumer import ForgedCount, authentic
from pathgrade.transport.kafka_settings import kafka_client_settings
from pathgrade.transport.message_auth import MessageKey
from pydantic import ValidationError

log = logging.getLogger(__name__)
TOPIC_WAIT_S = 10.0  # how long `TurnFeed.start` waits for the topic's partitions
MAX_BATCH_BYTES = 256 * 1024  # per message, well under Kafka's default 1 MiB record limit
_ENVELOPE_BYTES = len(TurnBatch.encode([]))


class TurnBatcher:
    """Gathers the digests of the turns one consumer evaluated into `pathgrade.turns`
    messages of at most MAX_BATCH_BYTES. A digest larger than that on its own (a confirmed
    action with huge arguments) is not shared, and logged."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        self._batches: list[list[bytes]] = [[]]
        self._size = _ENVELOPE_BYTES

    def add(self, digest: TurnDigest) -> bool:
        """Queue `digest`; False (logged) when it is too large to share."""
        encoded = digest.model_dump_json().encode()
        if _ENVELOPE_BYTES + len(encoded) > MAX_BATCH_BYTES:
            log.error("turn %s of conversation %s not shared: its digest is %d bytes, over "
                      "the %d-byte limit", digest.trace_id, digest.conversation_id,
                      len(encoded), MAX_BATCH_BYTES)  # fmt: skip
            return False
        if self._size + len(encoded) > MAX_BATCH_BYTES:
            self._batches.append([])
            self._size = _ENVELOPE_BYTES
        self._batches[-1].append(encoded)
        self._size += len(encoded) + 1
        return True

    def take(self) -> list[dict[str, Any]]:
        """`KafkaProducer.send` keyword arguments of the queued batches; empties the queue."""
        batches = [batch for batch in self._batches if batch]
        self._batches, self._size = [[]], _ENVELOPE_BYTES
        return [turn_message(batch, self.worker) for batch in batches]


def turn_message(digests_json: list[bytes], worker: str) -> dict[str, Any]:
    """`KafkaProducer.send` keyword arguments publishing one batch of digests (key = the
    worker, so one consumer's batches stay in order on one partition)."""
    return {
        "value": TurnBatch.encode(digests_json),
        "key": worker.encode(),
        "headers": [(WORKER_HEADER, worker.encode())],
    }


def remote_digests(message: Any, worker: str) -> list[TurnDigest]:
    """The digests a `pathgrade.turns` message carries; none for `worker`'s own turns nor
    (logged) for a value that is not a batch of digests."""
    if dict(message.headers or ()).get(WORKER_HEADER, b"").decode() == worker:
        return []
    try:
        return TurnBatch.from_json(message.value).turns
    except ValidationError as exc:
        log.error("skipping a pathgrade.turns message that is not a batch of turn digests "
                  "(offset %s): %s", message.offset, exc)  # fmt: skip
        return []


class TurnFeed:
    """Reads every partition of the turns topic, without a consumer group, from
    `lookback_s` ago (by timestamp; a partition with nothing that recent starts at its
    end), and hands out the digests other consumers published."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        worker: str,
        lookback_s: float,
        key: MessageKey | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.worker = worker
        self.lookback_s = lookback_s
        self.key = key  # the stack's message key: other messages are refused
        self.consumer: KafkaConsumer | None = None

    def start(self) -> None:
        """Assign every partition and seek `lookback_s` back. Raises RuntimeError when the
        topic does not exist."""
        consumer = KafkaConsumer(**kafka_client_settings(self.bootstrap_servers),
                                 group_id=None, enable_auto_commit=False,
                                 max_poll_records=5000)  # fmt: skip
        deadline = time.monotonic() + TOPIC_WAIT_S
        while not (partitions := consumer.partitions_for_topic(self.topic)):
            if time.monotonic() >= deadline:
                consumer.close()
                raise RuntimeError(
                    f"Kafka topic {self.topic} does not exist: create it (`pathgrade topics "
                    f"--kafka {self.bootstrap_servers}`) or run the realtime plane without "
                    "shared conversation history (`--no-shared-history`)"
                )
            time.sleep(0.2)
        assigned = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        since_ms = int((time.time() - self.lookback_s) * 1000)
        starts = consumer.offsets_for_times({tp: since_ms for tp in assigned})
        for tp in assigned:
            found = starts.get(tp)
            if found is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, found.offset)
        self.consumer = consumer

    def poll(self, counts: ForgedCount) -> list[TurnDigest]:
        """Digests that arrived since the last call, without waiting; a forged message
        (`transport.consumer.authentic`) is refused and counted in `counts`."""
        if self.consumer is None:
            return []
        records = self.consumer.poll(timeout_ms=0)
        return [
            digest
            for partition, messages in records.items()
            for message in messages
            if authentic(partition, message, self.key, counts)
            for digest in remote_digests(message, self.worker)
        ]

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
