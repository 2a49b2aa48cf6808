"""The store writer's SQL insert path end to end (broker, writer, chDB): messages the
store's SQL reads are stored by it, a message outside it (a value nested twice) takes the
Python decoder, is stored all the same and counted in `python_path_messages`."""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.writer import StoreWriter, StoreWriterConfig
from pathgrade.schemas.topics import SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

pytestmark = pytest.mark.integration


def test_a_message_outside_the_sql_is_decoded_in_python_and_counted(
    broker: LocalBroker, store: ClientStore
) -> None:
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=12, seed=41)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    nested = AnyValue()
    nested.array_value.values.add().array_value.values.add(string_value="deep")
    for index, span in enumerate(exporter.get_finished_spans()):
        request = encode_spans([span])
        if index == 5:
            request.resource_spans[0].scope_spans[0].spans[0].attributes.add(
                key="nested.twice", value=nested
            )
        producer.send(
            SPANS_TOPIC, request.SerializeToString(), headers=[(TENANT_HEADER, b"sqlpath")]
        )
    producer.flush()
    producer.close()

    writer = StoreWriter(StoreWriterConfig(broker.bootstrap), store)
    try:
        assert writer.drain_to({}, timeout_s=60, idle_s=1.0)
    finally:
        writer.close()
    stored = store.query(
        "SELECT count(), uniqExact(TraceId), countIf(SpanAttributes['nested.twice'] != '') "
        "FROM spans FINAL WHERE Tenant = 'sqlpath'"
    ).rows[0]
    assert stored == [summary.spans, summary.traces, 1]
    assert writer.stats.spans == summary.spans
    assert writer.stats.python_path_messages == 1
    assert writer.stats.messages == summary.spans
