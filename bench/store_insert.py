"""Store-writer CPU per span: ClickHouse parsing OTLP itself (the SQL insert path,
batch_plane.store.otlp_insert) against the Python row path, in one run.

Both paths start from the same `pathgrade.spans` values (the demo agent's traffic as the
collector forwards it on default settings, one trace per value) and end with the spans in
a throwaway embedded store (chDB, in this process, so its CPU is counted): the row path
decodes in Python, builds rows and inserts them (what the writer did before); the SQL path
parses each value once with upb (the guard against malformed values), appends tenant and
receive time and hands the batch to one INSERT ... SELECT. CPU is this process's (all
threads), per span stored, over `--rounds` batches of `--batch` spans each, alternating.

    python bench/store_insert.py [--batch 50000] [--rounds 3] [--flavor genai]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import request_bodies
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.otlp_insert import insert_sql_messages, sql_message
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.schemas.migrations import migrate
from pathgrade.schemas.otlp import decode_spans_message


def forwarded_values(spans: int, flavor: str) -> list[bytes]:
    """`pathgrade.spans` values of about `spans` spans, redacted as the collector does."""
    redactor = Redactor(RedactionConfig())
    values = []
    for body in request_bodies(spans, 512, flavor):
        request = ExportTraceServiceRequest.FromString(body)
        redactor.redact(request)
        values.extend(m.value for m in group_by_trace(request).messages)
    return values


def row_path(store: ClientStore, values: list[bytes], tenant: str) -> int:
    received = time.time_ns()
    rows = [span_row(s) for v in values for s in decode_spans_message(v, tenant, received)]
    store.insert_encodable("spans", rows, list(SPAN_COLUMNS))
    return len(rows)


def sql_path(store: ClientStore, values: list[bytes], tenant: str) -> int:
    received = time.time_ns()
    messages = [sql_message(v, tenant, received) for v in values]
    pending = [m for m in messages if m is not None]
    refused = insert_sql_messages(store, pending)
    if refused or len(pending) != len(messages):
        raise SystemExit(f"{len(refused) + len(messages) - len(pending)} values left the SQL path")
    return sum(m.spans for m in pending)


def cpu_per_span(run: Callable[[str], int], tenant: str) -> float:
    started = time.process_time()
    spans = run(tenant)
    return (time.process_time() - started) / spans * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=50_000, help="spans per insert")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flavor", default="genai")
    args = parser.parse_args()
    values = forwarded_values(args.batch, args.flavor)
    with tempfile.TemporaryDirectory(prefix="pathgrade-store-insert-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        sql_path(store, values[:10], "warm")  # first-use costs (schema parse, caches)
        row_path(store, values[:10], "warm")
        rows, sqls = [], []
        for round_ in range(args.rounds):
            rows.append(cpu_per_span(lambda t: row_path(store, values, t), f"rows{round_}"))
            sqls.append(cpu_per_span(lambda t: sql_path(store, values, t), f"sql{round_}"))
            print(f"round {round_}: rows {rows[-1]:.1f} us/span, sql {sqls[-1]:.1f} us/span")
        counts = store.query("SELECT Tenant, count() FROM spans GROUP BY Tenant ORDER BY 1")
        store.close()
    spans = sum(count for tenant, count in counts.rows if tenant == "rows0")
    row_cost, sql_cost = min(rows), min(sqls)
    print(f"{spans} spans per insert ({len(values)} values), best of {args.rounds} rounds")
    print(f"row path (Python decode + rows + insert): {row_cost:.1f} us CPU/span")
    print(f"SQL path (upb guard + one INSERT SELECT): {sql_cost:.1f} us CPU/span")
    print(f"ratio SQL / rows: {sql_cost / row_cost:.2f}")


if __name__ == "__main__":
    main()
