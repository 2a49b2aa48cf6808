"""The store writer's final drain reads past its targets until the topic goes quiet, so
what another producer (a replay, a restarted collector) wrote is stored before the
embedded broker's data ends."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.writer import BUSY_POLL_MS, IDLE_POLL_MS, StoreWriter
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.schemas.topics import SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

pytestmark = pytest.mark.integration


def test_drain_without_targets_stores_what_other_producers_wrote(
    broker: LocalBroker, store: ClientStore
) -> None:
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=30, seed=31)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for span in exporter.get_finished_spans():  # one message per span, no collector
        value = encode_spans([span]).SerializeToString()
        key = f"{span.context.trace_id:032x}".encode()
        producer.send(SPANS_TOPIC, value, key, headers=[(TENANT_HEADER, b"acme")])
    producer.flush()
    producer.close()

    writer = StoreWriter(StoreWriterConfig(bootstrap_servers=broker.bootstrap), store)
    try:
        assert writer.drain_to({}, timeout_s=60, idle_s=1.0)  # no targets: nothing known
    finally:
        writer.close()
    stored = store.query(
        "SELECT count(), uniqExact(TraceId) FROM spans FINAL WHERE Tenant = 'acme'"
    ).rows[0]
    assert stored == [summary.spans, summary.traces]


def test_a_span_the_store_cannot_encode_is_skipped_and_the_rest_stored(
    broker: LocalBroker, store: ClientStore
) -> None:
    """A foreign producer (no pathgrade collector validating it) writes a span starting
    after 2262, beyond DateTime64(9): that span is logged and counted, the others of its
    batch and of the stream are stored, and the writer does not retry forever."""
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=10, seed=32)
    request = encode_spans(exporter.get_finished_spans())
    poison = request.resource_spans[0].scope_spans[0].spans[3]
    poison.start_time_unix_nano = poison.end_time_unix_nano = 2**63 + 5
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    producer.send(SPANS_TOPIC, request.SerializeToString(), headers=[(TENANT_HEADER, b"poison")])
    producer.flush()
    producer.close()

    writer = StoreWriter(StoreWriterConfig(bootstrap_servers=broker.bootstrap), store)
    try:
        assert writer.drain_to({}, timeout_s=60, idle_s=1.0)
    finally:
        writer.close()
    assert writer.stats.rejected_spans == 1
    stored = store.query("SELECT count() FROM spans FINAL WHERE Tenant = 'poison'").rows[0][0]
    assert stored == summary.spans - 1


def test_an_idle_writer_waits_longer_per_poll_and_a_pending_batch_brings_the_short_wait_back(
    broker: LocalBroker, store: ClientStore
) -> None:
    """While no batch is pending a poll waits up to IDLE_POLL_MS (nothing falls due before
    a message arrives, and a poll returns as soon as one does: an idle stack's store owner
    2.2 -> 1.5% of a core, bench/idle_cpu.py); from the poll that read a message until its
    batch is written, BUSY_POLL_MS, so the batch is written when due."""
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=1, seed=33)
    writer = StoreWriter(StoreWriterConfig(bootstrap_servers=broker.bootstrap), store)
    waits: list[int] = []
    poll = writer.consumer.poll

    def recorded_poll(timeout_ms: int) -> Any:
        waits.append(timeout_ms)
        return poll(timeout_ms=timeout_ms)

    writer.consumer.poll = recorded_poll  # type: ignore[method-assign]
    try:
        writer.poll_once()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        value = encode_spans(exporter.get_finished_spans()).SerializeToString()
        producer.send(SPANS_TOPIC, value, headers=[(TENANT_HEADER, b"idle-poll")])
        producer.flush()
        producer.close()
        for _ in range(200):  # each poll returns once the message is there
            if writer.stats.messages:
                break
            writer.poll_once()
        read_at = len(waits)
        for _ in range(200):
            if writer.stats.spans:
                break
            writer.poll_once()
        written_at = len(waits)
        writer.poll_once()
    finally:
        writer.close()
    assert waits[0] == IDLE_POLL_MS and waits[-1] == IDLE_POLL_MS
    assert BUSY_POLL_MS < IDLE_POLL_MS
    assert written_at > read_at and set(waits[read_at:written_at]) == {BUSY_POLL_MS}
    stored = store.query("SELECT count() FROM spans FINAL WHERE Tenant = 'idle-poll'").rows[0]
    assert stored == [summary.spans]
