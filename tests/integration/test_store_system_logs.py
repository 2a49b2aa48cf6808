"""ClickHouse's own log tables on the store `pathgrade up` opens: after traffic, every table
the engine keeps in its `system` database (a server's query_log, part_log, trace_log, ...:
MergeTree tables, not the `System*` views of its state) has a TTL, and its data directory
holds nothing of them (docs/stack.md, "The data directory")."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import start_stack, wait_until

KEPT_LOGS = (
    "SELECT name, engine_full FROM system.tables "
    "WHERE database = 'system' AND NOT startsWith(engine, 'System')"
)
"""The tables the engine writes into itself; its state (`System*` engines) is not kept."""


def test_every_log_table_the_embedded_engine_keeps_is_bounded(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    stack, _, http_port = start_stack(data_dir)
    try:
        sent = send_demo_traces(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces"), traces=20, seed=7
        )
        ids = ",".join(f"'{t}'" for t in sent.trace_ids)
        stored = f"SELECT uniqExact(TraceId, SpanId) FROM spans WHERE TraceId IN ({ids})"
        wait_until(lambda: stack.scalar(stored) == sent.spans, timeout_s=120)
        stack.sql("SELECT count() FROM spans WHERE Duration > 0")  # a read, for a query log
        kept = stack.sql(KEPT_LOGS).rows
    finally:
        code = stack.terminate()
    assert code == 0, stack.output
    unbounded = [name for name, engine_full in kept if " TTL " not in f" {engine_full} "]
    assert unbounded == [], f"log tables the engine keeps without a TTL: {unbounded}"
    on_disk = {path.stem for path in (data_dir / "clickhouse" / "metadata").glob("system/*.sql")}
    assert on_disk <= {name for name, _ in kept}, f"on disk, not listed: {on_disk}"
