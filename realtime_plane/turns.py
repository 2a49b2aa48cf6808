"""Conversation history shared by the consumers of one group, through `pathgrade.turns`.

The turns of a conversation are separate traces, keyed by trace id, so they land on
different partitions of `pathgrade.spans` and, with several consumers in the group, on
different consumers. Each consumer publishes every conversation turn it evaluated (the
`pathgrade.spans` values that held the turn's spans, concatenated: concatenated protobuf
messages parse as one `TracesData` holding them all) and reads every partition of the
topic without a group, keeping the other consumers' turns still encoded until a later
turn of that conversation needs them. A turn published fewer than a poll interval before
the next turn of its conversation is evaluated elsewhere can be missed; turns of one
conversation are normally seconds apart (a user answers), and each waits its quiet window.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from schemas.model import Trace
from schemas.otlp import decode_spans_message, message_tenant_and_time
from schemas.topics import (
    RECEIVED_AT_HEADER,
    TENANT_HEADER,
    TRACE_ID_HEADER,
    WORKER_HEADER,
)

log = logging.getLogger(__name__)
TOPIC_WAIT_S = 10.0  # how long `TurnFeed.start` waits for the topic's partitions


@dataclass(frozen=True, slots=True)
class RemoteTurn:
    """A turn another consumer evaluated, still encoded: decoded on first use."""

    tenant: str
    conversation_id: str
    trace_id: str
    value: bytes
    received_at_ns: int

    def decode(self) -> Trace:
        """The turn's trace (spans of other traces a foreign message held are left out).
        Raises ValueError when the value is not OTLP TracesData."""
        spans = decode_spans_message(self.value, self.tenant, self.received_at_ns)
        return Trace(self.tenant, self.trace_id, [s for s in spans if s.trace_id == self.trace_id])


def turn_message(
    trace: Trace, conversation_id: str, values: Sequence[bytes], worker: str
) -> dict[str, Any]:
    """`KafkaProducer.send` keyword arguments publishing one evaluated turn."""
    received_at = max(span.received_at_ns for span in trace.spans)
    return {
        "value": b"".join(values),
        "key": conversation_id.encode(),
        "headers": [
            (TENANT_HEADER, trace.tenant.encode()),
            (RECEIVED_AT_HEADER, str(received_at).encode()),
            (TRACE_ID_HEADER, trace.trace_id.encode()),
            (WORKER_HEADER, worker.encode()),
        ],
    }


def remote_turn(message: Any, worker: str) -> RemoteTurn | None:
    """The turn a `pathgrade.turns` message carries; None for `worker`'s own turns and for
    messages without a conversation key or trace id header (not published by pathgrade)."""
    headers = dict(message.headers or ())
    trace_id = headers.get(TRACE_ID_HEADER, b"").decode()
    if headers.get(WORKER_HEADER, b"").decode() == worker or not trace_id or not message.key:
        return None
    tenant, received_at = message_tenant_and_time(message)
    return RemoteTurn(tenant, message.key.decode(), trace_id, message.value, received_at)


class TurnFeed:
    """Reads every partition of the turns topic, without a consumer group, from
    `lookback_s` ago (by timestamp; a partition with nothing that recent starts at its
    end), and hands out the turns other consumers published."""

    def __init__(self, bootstrap_servers: str, topic: str, worker: str, lookback_s: float):
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.worker = worker
        self.lookback_s = lookback_s
        self.consumer: KafkaConsumer | None = None

    def start(self) -> None:
        """Assign every partition and seek `lookback_s` back. Raises RuntimeError when the
        topic does not exist."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap_servers, group_id=None,
                                 enable_auto_commit=False, max_poll_records=5000)  # fmt: skip
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

    def poll(self) -> list[RemoteTurn]:
        """Turns that arrived since the last call, without waiting."""
        if self.consumer is None:
            return []
        records = self.consumer.poll(timeout_ms=0)
        return [
            turn
            for messages in records.values()
            for message in messages
            if (turn := remote_turn(message, self.worker)) is not None
        ]

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
