"""Store-writer CPU per span by batch size: ClickHouse parsing OTLP itself (the SQL insert
path, batch_plane.store.otlp_insert) against the Python row path, in one run.

Both paths start from the same `pathgrade.spans` values (`--mix`, as bench/ingest.py
makes it, forwarded as the collector does on default settings: content dropped, facts
recorded; one trace per value) and end with the spans in a throwaway embedded store
(chDB, in this process, so its CPU is counted): both parse each value once with upb (the
store writer's guard against malformed values); the row path then decodes in Python,
builds rows and inserts them; the SQL path appends tenant and receive time and hands the
batch to one INSERT ... SELECT, whose query analysis, a fixed cost per insert, is
included. CPU is this process's (all threads), per span stored, the best of `--rounds`
alternating rounds, for each batch size of `--batches`. Full garbage collections run on
the store owner's timer (`pathgrade.stack.gc_schedule`): on CPython's allocation counts
they tripled the row path's figure (decode and rows rescanning every span kept). The
crossover (the smallest batch from which on the SQL path costs less per span) is what
`StoreWriterConfig.sql_insert_min_spans` defaults from.

    python bench/store_insert.py [--batches 1000,5000,20000,50000] [--rounds 3]
                                 [--mix realistic|demo]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import MIXES
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.otlp_insert import PendingMessage, insert_messages, pending_message
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.batch_plane.store.writer_config import SQL_INSERT_MIN_SPANS
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.fingerprints import SECRET_BYTES, FactSecret
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas.decline import declined

from pathgrade.stack.gc_schedule import schedule_full_collections


def forwarded_values(spans: int, mix: str) -> list[bytes]:
    """`pathgrade.spans` values of about `spans` spans, forwarded as the collector does
    on default settings (facts recorded, then content dropped)."""
    facts = FactMaker(FactSecret(os.urandom(SECRET_BYTES)), PiiScanner())
    redactor = Redactor(RedactionConfig(), facts)
    values = []
    for body in MIXES[mix](spans, 512):
        request = ExportTraceServiceRequest.FromString(body)
        values.extend(m.value for m in group_by_trace(redactor.forward(request)).messages)
    return values


def parsed(values: list[bytes], tenant: str) -> list[PendingMessage]:
    received = time.time_ns()
    return [pending_message(v, tenant, received) for v in values]


def row_path(store: ClientStore, values: list[bytes], tenant: str) -> int:
    rows = [
        span_row(span)
        for m in parsed(values, tenant)
        for span in decode_resource_spans(m.traces.resource_spans, m.tenant, m.received_at_ns)
    ]
    store.insert_encodable("spans", rows, list(SPAN_COLUMNS))
    return len(rows)


def sql_path(store: ClientStore, values: list[bytes], tenant: str) -> int:
    messages = parsed(values, tenant)
    left = sum(map(declined, insert_messages(store, messages)))
    if left:
        raise SystemExit(f"{left} values left the SQL path")
    return sum(m.spans for m in messages)


def cpu_per_span(run: Callable[[], int]) -> float:
    started = time.process_time()
    spans = run()
    return (time.process_time() - started) / spans * 1e6


def prefix_of(values: list[bytes], spans: int) -> list[bytes]:
    """The first values holding at least `spans` spans."""
    total = 0
    for count, value in enumerate(values, 1):
        total += sum(len(s.spans) for r in pending_message(value, "", 0).traces.resource_spans
                     for s in r.scope_spans)  # fmt: skip
        if total >= spans:
            return values[:count]
    return values


def measure(
    store: ClientStore, values: list[bytes], rounds: int, label: str
) -> tuple[float, float]:
    """Best of `rounds` CPU us per span of (the row path, the SQL path) over `values`."""
    rows, sqls = [], []
    for round_ in range(rounds):
        tenant = f"{label}.{round_}"
        rows.append(cpu_per_span(lambda t=tenant: row_path(store, values, f"rows{t}")))
        sqls.append(cpu_per_span(lambda t=tenant: sql_path(store, values, f"sql{t}")))
    return min(rows), min(sqls)


def crossover(curve: list[tuple[int, float, float]]) -> int | None:
    """The smallest batch from which on the SQL path costs less per span (None: never)."""
    cheaper_from = None
    for spans, row_cost, sql_cost in curve:
        cheaper_from = (cheaper_from or spans) if sql_cost < row_cost else None
    return cheaper_from


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", default="1000,2000,5000,10000,20000,30000,50000",
                        help="spans per insert, comma-separated")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    args = parser.parse_args()
    batches = sorted(int(b) for b in args.batches.split(","))
    schedule_full_collections()  # as the store owner does (pathgrade.stack.children)
    values = forwarded_values(batches[-1], args.mix)
    curve = []
    with tempfile.TemporaryDirectory(prefix="pathgrade-store-insert-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        sql_path(store, values[:10], "warm")  # first-use costs (schema parse, caches)
        row_path(store, values[:10], "warm")
        for batch in batches:
            part = prefix_of(values, batch)
            row_cost, sql_cost = measure(store, part, args.rounds, str(batch))
            stored = store.query(
                "SELECT count() FROM spans WHERE Tenant = {t:String}", {"t": f"rows{batch}.0"}
            ).rows[0][0]
            curve.append((stored, row_cost, sql_cost))
            print(f"{stored:>7,} spans/insert ({len(part):>6,} values): rows {row_cost:6.1f} "
                  f"us/span, SQL {sql_cost:6.1f} us/span, ratio {sql_cost / row_cost:.2f}",
                  flush=True)  # fmt: skip
        store.close()
    spans, row_cost, sql_cost = curve[-1]
    print(f"mix {args.mix}, best of {args.rounds} rounds per size")
    print(f"at {spans:,} spans per insert: row path {row_cost:.1f}, SQL path {sql_cost:.1f} "
          f"us CPU/span, ratio SQL / rows {sql_cost / row_cost:.2f}")  # fmt: skip
    cheaper = crossover(curve)
    print(f"SQL path cheaper from {cheaper:,} spans per insert" if cheaper
          else "SQL path never cheaper in this range")  # fmt: skip
    print(f"(StoreWriterConfig.sql_insert_min_spans default: {SQL_INSERT_MIN_SPANS:,})")


if __name__ == "__main__":
    main()
