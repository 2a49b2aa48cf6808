"""The embedded store's memory limit (`pathgrade up --store-memory-mb`): the engine starts
with it, a query that would go over fails with ClickHouse's reason and the stack goes on
storing and evaluating what it accepts."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.batch_plane.store.errors import QueryError

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import start_stack, wait_until

MB = 1024 * 1024
OVER_256_MB = "SELECT count() FROM (SELECT groupArray(toString(number)) FROM numbers(50000000))"


def test_a_query_over_the_store_memory_limit_fails_clearly_and_the_stack_goes_on(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    limits = ("--store-memory-mb", "256", "--store-cache-mb", "16")
    stack, _, http_port = start_stack(data_dir, *limits)
    try:
        settings = dict(stack.sql(
            "SELECT name, value FROM system.server_settings WHERE name IN "
            "('max_server_memory_usage', 'mark_cache_size', 'primary_index_cache_size')"
        ).rows)  # fmt: skip
        assert settings == {
            "max_server_memory_usage": str(256 * MB),
            "mark_cache_size": str(16 * MB),
            "primary_index_cache_size": str(16 * MB),
        }
        with pytest.raises(QueryError, match="MEMORY_LIMIT_EXCEEDED"):
            stack.sql(OVER_256_MB)
        sent = send_demo_traces(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces"), traces=20, seed=91
        )
        ids = ",".join(f"'{t}'" for t in sent.trace_ids)
        stored = f"SELECT uniqExact(TraceId, SpanId) FROM spans WHERE TraceId IN ({ids})"
        wait_until(lambda: stack.scalar(stored) == sent.spans, timeout_s=120)
    finally:
        code = stack.terminate()
    assert code == 0, stack.output
