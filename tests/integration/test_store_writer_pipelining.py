"""The store writer inserts a batch in the background and reads on meanwhile, commits a
batch's offsets only once its insert returned, and retries a failed insert before reading
more, storing every span once (broker, writer, chDB: each of the store's inserts waits
for a permit the test gives, is refused while the test says so, else done by the real
store)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store.client import ClientStore, QueryError
from pathgrade.batch_plane.store.writer import StoreWriter
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.schemas.topics import SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker
from tests.integration.conftest import wait_until
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

pytestmark = pytest.mark.integration


class _HeldStore:
    """The real store, except that each insert first waits for a permit (`permits`) and is
    refused (QueryError) while `refusals` is above 0; counts the inserts asked for."""

    def __init__(self, store: ClientStore) -> None:
        self.store = store
        self.permits = threading.Semaphore(0)
        self.refusals = 0
        self.asked = 0

    def insert_encodable(self, table: str, rows: list[list[Any]], columns: list[str]) -> Any:
        self.asked += 1
        assert self.permits.acquire(timeout=120), "the test gave no permit"
        if self.refusals:
            self.refusals -= 1
            raise QueryError("insert failed: refused by the test")
        return self.store.insert_encodable(table, rows, columns)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _send(bootstrap: str, tenant: str, seed: int) -> int:
    """Demo spans, one per message, under `tenant`; returns how many."""
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=8, seed=seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for span in exporter.get_finished_spans():
        value = encode_spans([span]).SerializeToString()
        producer.send(SPANS_TOPIC, value, headers=[(TENANT_HEADER, tenant.encode())])
    producer.flush()
    producer.close()
    return summary.spans


def _committed(bootstrap: str, group: str) -> int:
    """The offsets `group` committed on the spans topic, summed over its partitions."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return sum(max(0, meta.offset) for tp, meta in offsets.items() if tp.topic == SPANS_TOPIC)


def _stored(store: ClientStore, tenant: str) -> list[int]:
    return store.query(
        "SELECT count(), uniqExact(SpanId) FROM spans WHERE Tenant = {t:String}", {"t": tenant}
    ).rows[0]


@pytest.fixture
def running(broker: LocalBroker, store: ClientStore) -> Iterator[tuple[StoreWriter, _HeldStore]]:
    """A store writer of a group of the test's own polling in a thread, on a held store; a
    batch is due once nothing came for 2 s (each `_send` is one batch)."""
    held = _HeldStore(store)
    config = StoreWriterConfig(
        bootstrap_servers=broker.bootstrap, group_id="held-writer", idle_flush_s=2.0,
        max_batch_age_s=120, sql_batch_age_s=120,
    )  # fmt: skip
    writer = StoreWriter(config, held)  # type: ignore[arg-type]  # the Store protocol
    stop = threading.Event()
    thread = threading.Thread(target=writer.run, args=(stop, 0.2), daemon=True)
    thread.start()
    yield writer, held
    held.permits.release(1000)
    stop.set()
    thread.join(timeout=60)
    writer.close()


def test_the_writer_reads_on_while_a_batch_is_inserted_and_commits_after_it(
    broker: LocalBroker, store: ClientStore, running: tuple[StoreWriter, _HeldStore]
) -> None:
    writer, held = running
    first = _send(broker.bootstrap, "held", seed=41)
    wait_until(lambda: held.asked == 1)  # the first batch's insert waits for its permit
    second = _send(broker.bootstrap, "held", seed=42)
    wait_until(lambda: writer.stats.messages == first + second)  # read meanwhile
    assert _committed(broker.bootstrap, "held-writer") == 0
    assert _stored(store, "held") == [0, 0]

    held.permits.release()
    wait_until(lambda: held.asked == 2)  # the second batch's insert, once the first returned
    assert _stored(store, "held") == [first, first]
    assert _committed(broker.bootstrap, "held-writer") == first
    held.permits.release()
    wait_until(lambda: _stored(store, "held") == [first + second] * 2)
    wait_until(lambda: _committed(broker.bootstrap, "held-writer") == first + second)
    assert held.asked == 2  # one insert per batch: the second grew while the first waited


def test_a_refused_insert_is_retried_with_what_was_read_since_and_nothing_is_lost(
    broker: LocalBroker, store: ClientStore, running: tuple[StoreWriter, _HeldStore]
) -> None:
    writer, held = running
    held.refusals = 1
    first = _send(broker.bootstrap, "refused", seed=43)
    wait_until(lambda: held.asked == 1)
    second = _send(broker.bootstrap, "refused", seed=44)
    wait_until(lambda: writer.stats.messages == first + second)
    held.permits.release()  # the first insert is refused
    wait_until(lambda: held.asked == 2)  # the retry: both batches, in the writer's thread
    assert held.refusals == 0
    assert _committed(broker.bootstrap, "held-writer") == 0
    assert _stored(store, "refused") == [0, 0]

    held.permits.release()
    wait_until(lambda: _stored(store, "refused") == [first + second] * 2)
    wait_until(lambda: _committed(broker.bootstrap, "held-writer") == first + second)
    assert held.asked == 2
