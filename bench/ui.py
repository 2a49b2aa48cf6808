"""Benchmark the browser UI on a store of 10 million spans: the trace list's first page and a
trace page, each against a `count()` over the same `spans` table measured in the same run.

The store (embedded chDB, as `pathgrade up` keeps it) is filled by ClickHouse itself from
`numbers()`: 2 million five-span traces over the last 24 hours (an `invoke_agent` root, two
`chat` spans and two `execute_tool` spans, 8 tools, 3 models, tokens, 3 % tool errors),
three tenants, and alerts on 1 % of the traces. The pages are requested through the real
application (Starlette's test client: routing, queries, templates; no socket), each
`--repeats` times; the figure is the median wall time, and the CPU time of this process
per request is printed beside it. The baselines are `SELECT count() FROM spans` (answered
from part metadata) and `SELECT count() FROM spans WHERE SpanName LIKE '%refund%'` (reads
a column of every row).

    .venv/bin/python bench/ui.py [--spans 10000000] [--repeats 7] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from starlette.testclient import TestClient

from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from pathgrade.web.viewers import Viewers

SPANS_PER_TRACE = 5
CHUNK_TRACES = 200_000
TENANTS = ("default", "acme", "globex")
TOOLS = ("lookup_order", "issue_refund", "search_kb", "change_plan", "create_ticket",
         "explain_bill", "lookup_customer", "reset_equipment")  # fmt: skip
MODELS = ("gpt-4o-mini-2024-07-18", "gpt-4.1-2025-04-14", "claude-3-5-haiku-20241022")


def _array(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def fill(store: ClientStore, spans: int) -> int:
    """Generate `spans` spans (whole traces) and alerts on 1 % of the traces; returns the
    number of traces."""
    traces = spans // SPANS_PER_TRACE
    now_ns = time.time_ns()
    for first in range(0, traces, CHUNK_TRACES):
        count = min(CHUNK_TRACES, traces - first)
        store.client.command(f"""
            INSERT INTO spans (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind,
                ServiceName, Duration, StatusCode, Tenant, GenAIOperation, GenAIAgentName,
                GenAIToolName, GenAIConversationId, GenAIRequestModel, GenAIResponseModel,
                GenAIInputTokens, GenAIOutputTokens, GenAIErrorType, ReceivedAt)
            SELECT
                fromUnixTimestamp64Nano(toInt64(start + position * 300000000)),
                trace, lower(hex(sipHash64(trace, position))),
                if(position = 0, '', lower(hex(sipHash64(trace, 0)))),
                multiIf(position = 0, 'invoke_agent support-agent', position % 2 = 1,
                        concat('chat ', model), concat('execute_tool ', tool)),
                'Internal', concat('svc-', toString(t % 4)),
                if(position = 0, 1500000000, 200000000 + (t % 7) * 50000000),
                if(position = 2 AND t % 33 = 0, 'Error', 'Unset'),
                {_array(TENANTS)}[t % 3 + 1],
                multiIf(position = 0, 'invoke_agent', position % 2 = 1, 'chat', 'execute_tool'),
                if(position = 0, 'support-agent', ''),
                if(position % 2 = 0 AND position > 0, tool, ''),
                if(position = 0, concat('conv-', toString(intDiv(t, 4))), ''),
                if(position % 2 = 1, model, ''), if(position % 2 = 1, model, ''),
                if(position % 2 = 1, 700 + t % 300, NULL), if(position % 2 = 1, 60, NULL),
                if(position = 2 AND t % 33 = 0, 'timeout', ''),
                fromUnixTimestamp64Nano(toInt64(start + 2000000000))
            FROM (
                SELECT number AS n, {first} + intDiv(number, {SPANS_PER_TRACE}) AS t,
                    number % {SPANS_PER_TRACE} AS position,
                    lower(hex(MD5(toString(t)))) AS trace,
                    {now_ns} - 86400000000000 + t * intDiv(86400000000000, {traces}) AS start,
                    {_array(TOOLS)}[t % {len(TOOLS)} + 1 + position % 2] AS tool_raw,
                    if(tool_raw = '', {_array(TOOLS)}[1], tool_raw) AS tool,
                    {_array(MODELS)}[t % {len(MODELS)} + 1] AS model
                FROM numbers({count * SPANS_PER_TRACE})
            )
        """)
    store.client.command(f"""
        INSERT INTO alerts (AlertKey, Tenant, Code, Name, Severity, Kind, Reason, TraceId,
            SpanId, Service, Agent, TraceStartNs, TraceEndNs, DetectedAtNs)
        SELECT concat('k', toString(t)), {_array(TENANTS)}[t % 3 + 1], 'PG110', 'orphan-write',
            'high', 'violation', 'Write on a read turn', lower(hex(MD5(toString(t)))), '',
            concat('svc-', toString(t % 4)), 'support-agent',
            {now_ns} - 86400000000000 + t * intDiv(86400000000000, {traces}),
            {now_ns} - 86400000000000 + t * intDiv(86400000000000, {traces}) + 1500000000,
            {now_ns} - 86400000000000 + t * intDiv(86400000000000, {traces}) + 3000000000
        FROM (SELECT number * 100 AS t FROM numbers({traces // 100}))
    """)
    return traces


def timed(call: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median wall seconds, mean CPU seconds of this process) over `repeats` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.fmean(cpus)


def page(client: TestClient, path: str) -> Callable[[], object]:
    def get() -> object:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
        return answer

    return get


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, help="keep the store here (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = args.data_dir or Path(scratch)
        store = open_client_store(embedded_dsn(str(data_dir)))
        client = store.client
        migrate(client)
        stored = store.query("SELECT count() FROM spans").rows[0][0]
        started = time.perf_counter()
        traces = fill(store, args.spans - stored) if stored < args.spans else stored // 5
        print(f"store: {store.query('SELECT count() FROM spans').rows[0][0]:,} spans, "
              f"{traces:,} traces (filled in {time.perf_counter() - started:.0f} s)")  # fmt: skip
        client.command("OPTIMIZE TABLE trace_roots FINAL")
        ui = TestClient(create_app(UiSettings(store)), base_url="http://127.0.0.1")
        tokens = data_dir / "viewer-tokens.yaml"
        tokens.write_text("bench-token: acme\n")
        acme = TestClient(
            create_app(UiSettings(store, Viewers(tokens))), base_url="http://ui.example",
            headers={"Authorization": "Bearer bench-token"},
        )  # fmt: skip
        some_trace = store.query(
            "SELECT TraceId FROM trace_roots WHERE Tenant = 'acme' ORDER BY Timestamp DESC "
            "LIMIT 1 OFFSET 1000"
        ).rows[0][0]
        measured = {
            "count() over spans (metadata)": lambda: store.query("SELECT count() FROM spans"),
            "count() over spans (SpanName LIKE, a column scan)": lambda: store.query(
                "SELECT count() FROM spans WHERE SpanName LIKE '%refund%'"
            ),
            "trace list, first page, loopback: every tenant (GET /traces)": page(ui, "/traces"),
            "trace list, first page, tenant acme's viewer": page(acme, "/traces"),
            "trace list, filtered by service (GET /traces?service=svc-1)": page(
                ui, "/traces?service=svc-1"
            ),
            "trace list, filtered by tool (GET /traces?tool=issue_refund)": page(
                ui, "/traces?tool=issue_refund"
            ),
            f"trace page (GET /trace/{some_trace[:8]}...)": page(ui, f"/trace/{some_trace}"),
            "trace page, tenant acme's viewer": page(acme, f"/trace/{some_trace}"),
        }
        results = {name: timed(call, args.repeats) for name, call in measured.items()}
        base_meta = results["count() over spans (metadata)"][0]
        base_scan = results["count() over spans (SpanName LIKE, a column scan)"][0]
        print(f"{'':68} {'median ms':>10} {'CPU ms':>8} {'x meta':>8} {'x scan':>8}")
        for name, (wall, cpu) in results.items():
            print(f"{name:68} {wall * 1000:10.1f} {cpu * 1000:8.1f} {wall / base_meta:8.1f} "
                  f"{wall / base_scan:8.2f}")  # fmt: skip
        client.close()


if __name__ == "__main__":
    main()
