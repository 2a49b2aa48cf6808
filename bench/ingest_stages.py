"""Per-stage cost of the ingest hot path, in µs per span, on bench/ingest.py's requests.

Runs every stage in this one process on one core: protobuf parse, validate, redact,
group by trace (collector side), then decode, span rows and the chDB insert (store side,
into a throwaway embedded store).

    python bench/ingest_stages.py [--spans 50000] [--batch 512] [--profile STAGE]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import request_bodies, span_count
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

from batch_plane.span_rows import SPAN_COLUMNS, span_row
from batch_plane.store import ClientStore, connect, embedded_dsn
from collector.grouping import group_by_trace
from collector.redact import RedactionConfig, Redactor
from collector.validate import validate_request
from schemas.migrations import migrate
from schemas.otlp import decode_spans_message


def timed(name: str, spans: int, work: Callable[[], Any], profile: str | None) -> Any:
    """Run `work` once, print its wall and CPU (all threads) µs/span; cProfile it when
    `profile` == name. CPU time is the figure that counts on a shared 2-core machine."""
    profiler = cProfile.Profile() if profile == name else None
    started, cpu_started = time.perf_counter(), time.process_time()
    result = profiler.runcall(work) if profiler else work()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    print(
        f"{name:<10} wall {elapsed / spans * 1e6:6.1f} µs/span  "
        f"cpu {cpu / spans * 1e6:6.1f} µs/span  {spans / elapsed:>9,.0f} spans/s"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(18)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--profile", default=None, help="stage name to cProfile")
    args = parser.parse_args()

    bodies = request_bodies(args.spans, args.batch)
    spans = span_count(bodies)
    redactor = Redactor(RedactionConfig())
    requests = timed(
        "parse", spans, lambda: [ExportTraceServiceRequest.FromString(b) for b in bodies], None
    )
    timed("validate", spans, lambda: [validate_request(r) for r in requests], args.profile)
    timed("redact", spans, lambda: [redactor.redact(r) for r in requests], args.profile)
    messages = timed(
        "group",
        spans,
        lambda: [value for r in requests for _, value in group_by_trace(r)],
        args.profile,
    )
    decoded = timed(
        "decode",
        spans,
        lambda: [decode_spans_message(m, "t", 1) for m in messages],
        args.profile,
    )
    rows = timed(
        "rows", spans, lambda: [span_row(s) for batch in decoded for s in batch], args.profile
    )
    with tempfile.TemporaryDirectory(prefix="pathgrade-stages-") as data_dir:
        client = connect(embedded_dsn(data_dir))
        migrate(client)
        store = ClientStore(client)
        columns = list(SPAN_COLUMNS)
        timed("insert", spans, lambda: store.insert("spans", rows, columns), args.profile)
        inserted = store.query("SELECT count() FROM spans").rows[0][0]
        print(f"inserted   {inserted} rows ({len(SPAN_COLUMNS)} columns)")


if __name__ == "__main__":
    main()
