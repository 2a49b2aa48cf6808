"""The store writer's two insert paths end to end (broker, writer, chDB): a batch of at
least `sql_insert_min_spans` spans is stored by the store's SQL, where a message outside
it (a value nested twice) takes the Python decoder, is stored all the same and counted in
`python_path_messages`, and an undecodable one is skipped and counted; a smaller batch
(the default threshold against a few traces) is decoded in Python, no SQL insert run.
One broker and one store for the module; each test writes a tenant of its own and reads
what the previous test's writer committed past."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.otlp_insert import SPAN_ATTRIBUTES
from pathgrade.batch_plane.store.writer import StoreWriter, StoreWriterStats
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.schemas.topics import SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import DemoSummary, send_demo_traces
from pathgrade.stack.broker import LocalBroker, ensure_topics
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    local = LocalBroker(log_path=tmp_path_factory.mktemp("broker") / "broker.log")
    local.start()
    ensure_topics(local.bootstrap)
    yield local
    local.stop()


def _send(bootstrap: str, tenant: str, seed: int, nested_at: int | None = None) -> DemoSummary:
    """The demo agent's spans, one per message, under `tenant`; with `nested_at`, that
    message's span carries a value nested twice, and a value that is not OTLP follows."""
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=12, seed=seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    headers = [(TENANT_HEADER, tenant.encode())]
    nested = AnyValue()
    nested.array_value.values.add().array_value.values.add(string_value="deep")
    for index, span in enumerate(exporter.get_finished_spans()):
        request = encode_spans([span])
        if index == nested_at:
            request.resource_spans[0].scope_spans[0].spans[0].attributes.add(
                key="nested.twice", value=nested
            )
            producer.send(SPANS_TOPIC, request.SerializeToString(), headers=headers)
            producer.send(SPANS_TOPIC, b"\xff\xff not OTLP", headers=headers)
        else:
            producer.send(SPANS_TOPIC, request.SerializeToString(), headers=headers)
    producer.flush()
    producer.close()
    return summary


def _drain(bootstrap: str, store: ClientStore, **options: float) -> StoreWriterStats:
    """Drain the topic into `store` as one batch (each SQL insert costs a share of a
    second of query analysis), then close."""
    options = {"max_batch_age_s": 60, "idle_flush_s": 30, **options}
    writer = StoreWriter(StoreWriterConfig(bootstrap_servers=bootstrap, **options), store)
    try:
        assert writer.drain_to({}, timeout_s=60, idle_s=1.0)
    finally:
        writer.close()
    return writer.stats


def _stored(store: ClientStore, tenant: str) -> list[int]:
    return store.query(
        "SELECT count(), uniqExact(TraceId), countIf(SpanAttributes['nested.twice'] != '') "
        "FROM spans FINAL WHERE Tenant = {t:String}",
        {"t": tenant},
    ).rows[0]


def test_a_large_batch_takes_the_sql_path_and_a_message_outside_it_python(
    module_broker: LocalBroker, store: ClientStore
) -> None:
    summary = _send(module_broker.bootstrap, "sqlpath", seed=41, nested_at=5)
    stats = _drain(module_broker.bootstrap, store, sql_insert_min_spans=1)
    assert _stored(store, "sqlpath") == [summary.spans, summary.traces, 1]
    assert stats.sql_inserts >= 1
    assert stats.python_path_messages == 1
    assert stats.declines == {SPAN_ATTRIBUTES.reason: 1}  # its nested value
    assert stats.undecodable_messages == 1
    assert (stats.messages, stats.spans) == (summary.spans + 1, summary.spans)


def test_a_batch_below_the_threshold_is_decoded_in_python(
    module_broker: LocalBroker, store: ClientStore
) -> None:
    summary = _send(module_broker.bootstrap, "rowpath", seed=42, nested_at=3)
    stats = _drain(module_broker.bootstrap, store)  # default threshold: far above 12 traces
    assert _stored(store, "rowpath") == [summary.spans, summary.traces, 1]
    assert (stats.sql_inserts, stats.python_path_messages) == (0, 0)
    assert stats.undecodable_messages == 1
    assert (stats.messages, stats.spans) == (summary.spans + 1, summary.spans)
