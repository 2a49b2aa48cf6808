"""ClickHouse's own log tables on the embedded store: chDB keeps none, so nothing of
ClickHouse's grows without bound beside pathgrade's tables (docs/scale.md)."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.store.client import connect, embedded_dsn

SYSTEM_LOGS = (
    "query_log", "query_thread_log", "query_views_log", "part_log", "trace_log", "text_log",
    "metric_log", "asynchronous_metric_log", "processors_profile_log", "error_log",
    "session_log", "opentelemetry_span_log", "crash_log",
)  # fmt: skip
"""The log tables a ClickHouse server writes when its configuration enables them."""


def test_the_embedded_store_writes_no_clickhouse_log_table(tmp_path) -> None:
    client = connect(embedded_dsn(str(tmp_path)))
    client.command("CREATE TABLE probe (n UInt64) ENGINE = MergeTree ORDER BY n")
    client.command("INSERT INTO probe SELECT number FROM numbers(1000)")
    assert client.query("SELECT count() FROM probe").result_rows == [(1000,)]
    kept = client.query(
        "SELECT name FROM system.tables WHERE database = 'system' AND name IN %(names)s",
        parameters={"names": SYSTEM_LOGS},
    ).result_rows
    assert kept == []
    with pytest.raises(Exception, match="query_log"):
        client.query("SELECT count() FROM system.query_log")
