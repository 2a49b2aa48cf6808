"""Publishing to Kafka with the guarantee: acknowledged means in Kafka or fsynced locally.

`publish` returns only when Kafka acknowledged every message (acks=all) or the messages
not acknowledged in time are fsynced in the spill file. While the spill holds anything,
new messages go to the spill too, so a trace's messages keep their order; a drainer
thread moves the spill to Kafka when the broker is back.

`hold()` diverts everything to the spill on purpose (the embedded stack does so while it
swaps its memory-only broker for a fresh one) and `resume()` lets the drainer send it on.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError
from pathgrade.collector.spill import OutgoingMessage, SpillFile
from pathgrade.schemas.topics import (
    RECEIVED_AT_HEADER,
    SPANS_TOPIC,
    TENANT_HEADER,
    kafka_client_settings,
)

log = logging.getLogger(__name__)


def producer_for(bootstrap_servers: str, ack_timeout_s: float, **options: Any) -> KafkaProducer:
    """A producer tuned for trace messages: acks=all, batching, bounded blocking."""
    timeout_ms = int(ack_timeout_s * 1000)
    settings: dict[str, Any] = {
        **kafka_client_settings(bootstrap_servers),
        "acks": "all",
        "linger_ms": 5,
        "batch_size": 512 * 1024,
        "max_request_size": 16 * 1024 * 1024,
        "max_block_ms": timeout_ms,
        "request_timeout_ms": max(timeout_ms, 1000),
        "delivery_timeout_ms": max(30_000, 2 * timeout_ms + 1000),
        "retry_backoff_ms": 200,
    }
    settings.update(options)
    return KafkaProducer(**settings)


class KafkaPublisher:
    """Sends trace messages, falling back to the spill; tracks produced offsets."""

    def __init__(
        self,
        producer: KafkaProducer,
        spill: SpillFile,
        topic: str = SPANS_TOPIC,
        ack_timeout_s: float = 5.0,
        drain_backoff_s: float = 1.0,
    ) -> None:
        self.producer = producer
        self.spill = spill
        self.topic = topic
        self.ack_timeout_s = ack_timeout_s
        self.drain_backoff_s = drain_backoff_s
        self.next_offsets: dict[int, int] = {}  # partition -> offset after the last acked
        self._offsets_lock = threading.Lock()
        self._held = False
        self._sending = 0  # publish/drain calls talking to Kafka right now
        self._sending_done = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._drainer = threading.Thread(target=self._drain_loop, name="spill-drainer", daemon=True)

    def start(self) -> None:
        self._drainer.start()
        if self.spill.pending():
            self._wake.set()

    def publish(self, messages: list[OutgoingMessage]) -> None:
        """Return once every message is acked by Kafka or fsynced; raises SpillFull."""
        if not messages:
            return
        if not self._begin_sending():
            self.spill.append(messages)
            return
        try:
            if self.spill.pending():
                self.spill.append(messages)
                self._wake.set()
                return
            failed = self._send_and_wait(messages)
            if failed:
                log.warning("Kafka did not acknowledge %d messages; spilling them", len(failed))
                self.spill.append(failed)
                self._wake.set()
        finally:
            self._end_sending()

    def _begin_sending(self) -> bool:
        """Register a call that will talk to Kafka; False while held (spill instead)."""
        with self._sending_done:
            if self._held:
                return False
            self._sending += 1
            return True

    def _end_sending(self) -> None:
        with self._sending_done:
            self._sending -= 1
            self._sending_done.notify_all()

    def hold(self, timeout_s: float = 60.0) -> dict[int, int] | None:
        """Send nothing more to Kafka: wait for the sends under way, then return the
        produced offsets (partition -> next offset); None when sends were still under way
        after `timeout_s` (the offsets are not final then). Until `resume()`, publish()
        only spills."""
        with self._sending_done:
            self._held = True
            settled = self._sending_done.wait_for(lambda: self._sending == 0, timeout=timeout_s)
        return self.produced_offsets() if settled else None

    def resume(self, producer: KafkaProducer | None = None) -> None:
        """Undo `hold()`: the drainer sends what was spilled meanwhile, in order. Pass a
        new `producer` when the broker was replaced (an idempotent producer's id means
        nothing to a new broker)."""
        with self._sending_done:
            if producer is not None:
                self.producer.close(timeout=0)
                self.producer = producer
                with self._offsets_lock:
                    self.next_offsets = {}  # the new broker numbers its log from 0
            self._held = False
        self._wake.set()

    def _send_and_wait(self, messages: list[OutgoingMessage]) -> list[OutgoingMessage]:
        """Send all, wait for acks; return the messages not acknowledged in time."""
        futures = []
        failed = []
        for message in messages:
            try:
                futures.append((message, self._send(message)))
            except KafkaError:
                failed.append(message)
        for message, future in futures:
            try:
                metadata = future.get(timeout=self.ack_timeout_s)
            except KafkaError:
                failed.append(message)
                continue
            self._record(metadata.partition, metadata.offset)
        return failed

    def _send(self, message: OutgoingMessage) -> Any:
        headers = [
            (TENANT_HEADER, message.tenant.encode()),
            (RECEIVED_AT_HEADER, str(message.received_at_ns).encode()),
        ]
        return self.producer.send(self.topic, key=message.key, value=message.value, headers=headers)

    def _record(self, partition: int, offset: int) -> None:
        with self._offsets_lock:
            if offset + 1 > self.next_offsets.get(partition, 0):
                self.next_offsets[partition] = offset + 1

    def produced_offsets(self) -> dict[int, int]:
        """Partition -> next offset after everything this publisher had acknowledged."""
        with self._offsets_lock:
            return dict(self.next_offsets)

    def _drain_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(timeout=self.drain_backoff_s)
            self._wake.clear()
            while self.spill.pending() and not self._stop.is_set() and self._begin_sending():
                try:
                    messages, position = self.spill.read_batch()
                    sent = not self._send_and_wait(messages)
                    if sent:
                        self.spill.mark_drained(position)
                finally:
                    self._end_sending()
                if not sent:
                    self._stop.wait(self.drain_backoff_s)  # broker still away: retry later
                    break
                log.info("drained %d spilled messages to Kafka", len(messages))

    def close(self, drain_timeout_s: float = 5.0) -> None:
        """Flush the producer, give the drainer a last chance, stop."""
        self._wake.set()
        try:
            self.producer.flush(timeout=drain_timeout_s)
        except KafkaError as exc:
            log.warning("producer flush did not complete: %s", exc)
        self._stop.set()
        self._drainer.join(timeout=drain_timeout_s + self.ack_timeout_s)
        self.producer.close(timeout=drain_timeout_s)
        self.spill.close()
