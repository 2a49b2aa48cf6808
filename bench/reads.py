"""Reads of the store: every page of the browser UI and every read a command or a scorer
makes, timed on stores of growing size (`scale`); and the CPU a read costs on the reader
session (`cpu`).

`scale`: builds one embedded chDB store (`bench/scale_store.py`: a realistic seed through
the store writer's SQL insert, three tenants, alerts and scores, grown in SQL with the
seed's distributions over thirty days) to each size of `--sizes` in turn, and at each size
times every request of `REQUESTS` through the real application (Starlette's test client:
routing, the typed queries, templates; no socket) or the store room's typed reads, each
`--repeats` times warm (after one untimed call) and `--cold` times cold, its parameters
varied (traces, conversations, tools, models, codes, runs and cursors drawn from the
store). Cold: before each call ClickHouse's caches are dropped (`SYSTEM DROP ... CACHE`:
marks, uncompressed blocks, index marks, the query-condition cache, mmap) and the store's
files are dropped from the OS page cache (`posix_fadvise` DONTNEED on each file: this
store's pages only). Server time is the request's wall time in this process. Rows and
bytes read are ClickHouse's own counts of every query the request ran (the
`SelectedRows`/`SelectedBytes` of `system.events`, before and after the request: chDB keeps
no `system.query_log`, and the `read_rows` it returns with a result counts the result's
rows), medians over the warm calls, and the compressed bytes read from files by the cold
calls (`ReadCompressedBytes`, median). A tenant's viewer
(`globex`, 30% of the traffic) requests some pages too; its rows read against the
operator's show that its reads stay within its own rows. The store is in this process, as
in the stack's store owner: the peak RSS printed is this process's while the size was
built and while it was read (VmHWM, reset between); unbounded unless `--store-memory-mb`
bounds the engine as the stack's `--store-memory-mb` does. Each size's figures are printed
as ratios to the first size's and to the previous size's, then the requests over issue
46's bounds (300 ms p95 warm, 2 s cold), slowest first. A request that fails (an error
page, a query error such as MEMORY_LIMIT_EXCEEDED) is printed as FAILED with the error and
the bench goes on; one whose calls took `--budget-s` makes no more warm calls (the column
`warm` says how many it made). Before reading, each size waits for the merges (at most
`--settle-s`).

    python bench/reads.py scale [--sizes 1000000,10000000] [--seed-spans 20000]
                                [--repeats 20] [--cold 3] [--data-dir DIR] [--only TEXT,...]
                                [--budget-s 600] [--settle-s 1800] [--store-memory-mb MB]
    python bench/reads.py scale --data-dir DIR --against REV [--repeats 5] [--cold 1] [--only ...]
    python bench/reads.py explain --data-dir DIR --only TEXT,... [--top 2]
    python bench/reads.py cpu [--queries 300] [--rounds 3]

`scale --against REV` (a commit of this repository, or the python of another checkout's
venv; bench/ingest.py's `baseline_python` checks a commit out as a `git worktree` with a venv
of its own, once): the same requests on the store `--data-dir` holds (as kept by an earlier
`scale`, not grown) through this checkout's reads and through REV's. Each side runs in a
process of its own (one process per chDB directory), this bench file on its side's python
(so its `pathgrade` is that checkout's), on its own copy of the store, which it migrates
with its own migrations when it opens it (the bench says when the two checkouts' migrations
differ); the parameters are drawn once, by this side. The calls alternate this, REV, this,
REV: each cold call, the untimed call, each warm call. Prints each side's p50/p95 warm,
cold maximum and rows read (median of the warm calls), and this / REV of the p95 and rows.

`explain`: on a store `scale` kept (`--data-dir`), each query one call of the requests
named runs, the slowest first, with its time and rows read run alone, and ClickHouse's
`EXPLAIN indexes = 1` of the `--top` slowest (which partitions, parts and granules each
index keeps).

`cpu`: anyone's SQL on the reader session against pathgrade's own query on the writer
session, one embedded chDB store. A read (`ClientStore.query(..., readonly=True)`: what
`pathgrade sql`, the browser UI and every query through the loopback endpoint run) first
has ClickHouse parse the statement, checks its canonical form
(`pathgrade.batch_plane.store.reads`) and what ClickHouse's syntax tree of it reaches
(`read_policy`), then runs that; a statement text checked before (the UI's queries,
repeated with other parameters) is not checked again. The baseline is the same
parametrised query on the writer session. Alternating rounds in one run; prints CPU ms per
query of each, a new statement text every query (each one checked) and the same text
every query (checked once), and the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale_store
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.batch_plane.store.client import (
    ClientStore,
    embedded_dsn,
    engine_bounds,
    open_client_store,
)
from pathgrade.batch_plane.store.errors import QueryError
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.trace_rows import load_trace
from starlette.testclient import TestClient

from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from pathgrade.web.viewers import Viewers

QUERY = "SELECT count() FROM spans FINAL WHERE TraceId = {trace:String}"
_NUMBERS = itertools.count()
TENANT = "globex"
"""The tenant whose viewer requests pages too."""
CACHES = ("MARK", "UNCOMPRESSED", "INDEX MARK", "INDEX UNCOMPRESSED", "MMAP", "QUERY CONDITION")
"""ClickHouse's caches a cold call starts without (`SYSTEM DROP <name> CACHE`)."""


# ------------------------------------------------------------------------------ cpu mode


def cpu_per_query_ms(store: ClientStore, queries: int, readonly: bool, fresh: bool) -> float:
    """CPU ms per query; with `fresh`, each query's text is new (a comment no earlier
    query had), so each is checked."""
    started = time.process_time()
    for _ in range(queries):
        sql = f"/* {next(_NUMBERS)} */ {QUERY}" if fresh else QUERY
        store.query(sql, {"trace": "ab" * 16}, readonly=readonly)
    return (time.process_time() - started) / queries * 1000


def cpu_mode(args: argparse.Namespace) -> None:
    """The reader session's check against the writer session, CPU per query."""
    with tempfile.TemporaryDirectory(prefix="pathgrade-reads-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        writer, checked, repeated = [], [], []
        for _ in range(args.rounds):
            writer.append(cpu_per_query_ms(store, args.queries, False, fresh=True))
            checked.append(cpu_per_query_ms(store, args.queries, True, fresh=True))
            repeated.append(cpu_per_query_ms(store, args.queries, True, fresh=False))
        store.close()
    best_writer = min(writer)
    print(f"writer session            {best_writer:.2f} ms CPU per query (best of {args.rounds})")
    for label, times in (("reader, every text new", checked), ("reader, same text", repeated)):
        best = min(times)
        print(f"{label:<25} {best:.2f} ms CPU per query, {best / best_writer:.2f}x the writer's")


# ---------------------------------------------------------------------------- scale mode


EVENTS = ("SelectedRows", "SelectedBytes", "ReadCompressedBytes")
"""ClickHouse's counters of rows and bytes read from tables (uncompressed) and of compressed
bytes read from files, summed over the process (`system.events`): chDB keeps no
`system.query_log`, and the `read_rows` it returns with a result counts the result's rows."""


def read_counts(store: ClientStore) -> dict[str, int]:
    """The `EVENTS` counters now."""
    rows = store.query(
        "SELECT event, value FROM system.events WHERE event IN {names:Array(String)}",
        {"names": list(EVENTS)},
    ).rows
    return {name: 0 for name in EVENTS} | {name: int(value) for name, value in rows}


@dataclass
class Samples:
    """Parameters drawn from the store for the requests to vary over."""

    traces: list[tuple[str, str]]  # (tenant, trace id) of the last 24 hours
    tenant_traces: list[str]  # TENANT's
    conversations: list[str]
    cursors: list[str]  # trace-list cursors a page after the first (24 hours)
    tools: list[str]
    models: list[str]
    codes: list[str]
    runs: list[str]
    now_ns: int  # the bench's clock: the UI's, and `now()` in the getting-started sample

    def pick(self, name: str, index: int) -> Any:
        values = getattr(self, name)
        return values[index % len(values)]


def samples(store: ClientStore, now_ns: int) -> Samples:
    """Sample values of the store's last 24 hours (tools, models, codes: every value)."""

    def column(sql: str, parameters: dict[str, Any] | None = None) -> list[Any]:
        return [
            row[0] if len(row) == 1 else tuple(row) for row in store.query(sql, parameters).rows
        ]

    day = {"start": now_ns - 86_400 * 10**9}
    recent = "Timestamp >= fromUnixTimestamp64Nano({start:Int64})"
    roots = column(
        f"SELECT Tenant, TraceId FROM trace_roots WHERE {recent} "
        "ORDER BY cityHash64(TraceId) LIMIT 40", day,
    )  # fmt: skip
    cursors = [
        f"{value}~{trace}~{tenant}"
        for value, trace, tenant in column(
            "SELECT toUnixTimestamp64Nano(Timestamp), TraceId, Tenant FROM trace_roots "
            f"WHERE {recent} ORDER BY Timestamp DESC, TraceId DESC, Tenant DESC "
            "LIMIT 1 BY intDiv(rowNumberInAllBlocks(), 50) LIMIT 20 OFFSET 1",
            day,
        )
    ]
    return Samples(
        traces=roots,
        tenant_traces=[trace for tenant, trace in roots if tenant == TENANT] or [roots[0][1]],
        conversations=column(
            f"SELECT DISTINCT GenAIConversationId FROM trace_roots WHERE {recent} "
            "AND GenAIConversationId != '' ORDER BY cityHash64(GenAIConversationId) LIMIT 20",
            day,
        ),
        cursors=cursors,
        tools=column("SELECT DISTINCT GenAIToolName FROM bench_seed WHERE GenAIToolName != ''"),
        models=column(
            "SELECT DISTINCT GenAIResponseModel FROM bench_seed WHERE GenAIResponseModel != ''"
        ),
        codes=column("SELECT DISTINCT Code FROM bench_seed_alerts"),
        runs=column("SELECT DISTINCT RunId FROM scores WHERE RunId != '' LIMIT 20"),
        now_ns=now_ns,
    )


@dataclass(frozen=True)
class Request:
    """One request, its parameters varied by the call's index: a UI path (`page`, as the
    operator or as TENANT's viewer) or a typed read (`read`)."""

    name: str
    page: Callable[[Samples, int], str] | None = None
    read: Callable[[ClientStore, Samples, int], object] | None = None
    tenant: bool = False


def getting_started_sql() -> str:
    """The `pathgrade sql` sample of docs/getting-started.md (the README's first hour)."""
    doc = Path(__file__).resolve().parents[1] / "docs" / "getting-started.md"
    match = re.search(r'^pathgrade sql "(.+)"$', doc.read_text(), re.MULTILINE)
    assert match, f"{doc}: no pathgrade sql sample"
    return match[1]


GETTING_STARTED_SQL = getting_started_sql()


def _traces(query: str = "") -> Callable[[Samples, int], str]:
    return lambda s, i: "/traces" + (f"?{query}" if query else "")


def _traces_by(name: str, sample: str) -> Callable[[Samples, int], str]:
    return lambda s, i: f"/traces?{name}={s.pick(sample, i)}"


REQUESTS: tuple[Request, ...] = (
    Request("traces: first page, 24h", _traces()),
    Request("traces: first page, 24h (tenant)", _traces(), tenant=True),
    Request("traces: next page (keyset)", lambda s, i: f"/traces?after={s.pick('cursors', i)}"),
    Request("traces: 7 days", _traces("from=7d")),
    Request("traces: 30 days, by duration", _traces("from=30d&sort=duration")),
    Request("traces: service", _traces("service=support-agent")),
    Request("traces: agent", _traces("agent=support-agent")),
    Request("traces: tool", _traces_by("tool", "tools")),
    Request("traces: tool (tenant)", _traces_by("tool", "tools"), tenant=True),
    Request("traces: model", _traces_by("model", "models")),
    Request("traces: conversation", _traces_by("conversation", "conversations")),
    Request("traces: alert code", _traces_by("code", "codes")),
    Request("traces: severity high", _traces("severity=high")),
    Request("traces: with alerts", _traces("alert=yes")),
    Request("traces: without alerts", _traces("alert=no")),
    Request("traces: scored", _traces("score=yes")),
    Request("traces: errors", _traces("error=yes")),
    Request("traces: over 5 s", _traces("min_ms=5000")),
    Request("traces: cost over $0.001", _traces("min_cost=0.001")),
    Request("traces: text 'refund'", _traces("q=refund")),
    Request("traces: run", _traces_by("run", "runs")),
    Request("trace page", lambda s, i: "/trace/{}".format(s.pick("traces", i)[1])),
    Request(
        "trace page (tenant)", lambda s, i: f"/trace/{s.pick('tenant_traces', i)}", tenant=True
    ),
    Request("conversation", lambda s, i: f"/conversation/{s.pick('conversations', i)}"),
    Request("alerts: 24h", lambda s, i: "/alerts"),
    Request("alerts: 24h (tenant)", lambda s, i: "/alerts", tenant=True),
    Request("alerts: 30 days", lambda s, i: "/alerts?from=30d"),
    Request("alerts: code, 7 days", lambda s, i: f"/alerts?from=7d&code={s.pick('codes', i)}"),
    Request("runs & gates", lambda s, i: "/runs"),
    Request(
        "compare two runs",
        lambda s, i: f"/compare?candidate={s.pick('runs', i)}&baseline={s.pick('runs', i + 1)}",
    ),
    Request("datasets", lambda s, i: "/datasets"),
    Request("review queue", lambda s, i: "/review"),
    Request("edge runs", lambda s, i: "/edge"),
    Request("detectors", lambda s, i: "/detectors"),
    Request(
        "online scorer: load_trace",
        read=lambda store, s, i: load_trace(store, *s.pick("traces", i)),
    ),
    Request(
        "gate: latest_of_run",
        read=lambda store, s, i: stored_scores.latest_of_run(store, s.pick("runs", i)),
    ),
    Request(
        "sql: count() FROM spans",
        read=lambda store, s, i: store.query("SELECT count() FROM spans", readonly=True),
    ),
    Request(
        "sql: the README's sample",
        read=lambda store, s, i: store.query(
            GETTING_STARTED_SQL.replace("now()", f"fromUnixTimestamp64Nano(toInt64({s.now_ns}))"),
            readonly=True,
        ),
    ),
)


@dataclass
class Figures:
    """One request's figures at one size."""

    warm_ms: list[float] = field(default_factory=list)
    cold_ms: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    disk_bytes: list[int] = field(default_factory=list)  # compressed, cold calls
    error: str = ""  # the first failure (the request's figures stop there)

    def p(self, q: float, cold: bool = False) -> float:
        """The `q` quantile (nearest rank) of the warm (or cold) times, ms."""
        times = sorted(self.cold_ms if cold else self.warm_ms)
        return times[max(0, math.ceil(q * len(times)) - 1)] if times else math.nan


class RequestFailed(Exception):
    """A page answered with another status than 200."""


@dataclass
class Bench:
    """The store and the UI's clients on it."""

    store: ClientStore
    data_dir: Path
    operator: TestClient
    tenant: TestClient
    now_ns: int

    def call(self, request: Request, s: Samples, index: int) -> None:
        if request.read is not None:
            request.read(self.store, s, index)
            return
        assert request.page is not None
        path = request.page(s, index)
        answer = (self.tenant if request.tenant else self.operator).get(path)
        if answer.status_code != 200:
            raise RequestFailed(f"GET {path} -> {answer.status_code}: {answer.text[:400]}")

    def make_cold(self) -> None:
        for cache in CACHES:
            self.store.command(f"SYSTEM DROP {cache} CACHE")
        scale_store.evict_files(self.data_dir)

    def timed(self, request: Request, s: Samples, index: int) -> tuple[float, dict[str, int]]:
        """One call's wall ms and what it read (`EVENTS`, the counters' growth)."""
        before = read_counts(self.store)
        started = time.perf_counter()
        self.call(request, s, index)
        elapsed = (time.perf_counter() - started) * 1000
        after = read_counts(self.store)
        return elapsed, {name: after[name] - before[name] for name in EVENTS}

    def measure(
        self, request: Request, s: Samples, repeats: int, cold: int, budget_s: float
    ) -> Figures:
        """The request's figures: `cold` cold calls, one untimed, then `repeats` warm calls,
        fewer once its calls took `budget_s` (at least one). A failure (an error page, a
        query error such as MEMORY_LIMIT_EXCEEDED) is recorded in `error` and ends its
        calls."""
        figures = Figures()
        started = time.perf_counter()
        try:
            for index in range(cold):
                self.make_cold()
                elapsed, read = self.timed(request, s, index)
                figures.cold_ms.append(elapsed)
                figures.disk_bytes.append(read["ReadCompressedBytes"])
            self.call(request, s, repeats)  # warm-up, untimed
            for index in range(repeats):
                if figures.warm_ms and time.perf_counter() - started > budget_s:
                    break
                elapsed, read = self.timed(request, s, index)
                figures.warm_ms.append(elapsed)
                figures.rows.append(read["SelectedRows"])
                figures.bytes.append(read["SelectedBytes"])
        except (RequestFailed, QueryError) as exc:
            figures.error = str(exc).splitlines()[0][:300]
        return figures


def latest_span_ns(store: ClientStore) -> int:
    """When the latest stored span started (0 on an empty store): the bench's clock, so a
    store kept from an earlier run is read as of when it was grown."""
    rows = store.query("SELECT toUnixTimestamp64Nano(max(Timestamp)) FROM spans").rows
    return int(rows[0][0])


def open_bench(data_dir: Path, engine: dict[str, int] | None) -> Bench:
    """The store in `data_dir` (its engine's options `engine`, `engine_bounds`) and the UI's
    clients on it."""
    store = open_client_store(embedded_dsn(str(data_dir)), engine)
    migrate(store.client)
    tokens = data_dir / "viewer-tokens.yaml"
    tokens.write_text(f"bench-token: {TENANT}\n")
    now_ns = latest_span_ns(store) or time.time_ns()
    operator = TestClient(
        create_app(UiSettings(store, clock_ns=lambda: now_ns)), base_url="http://127.0.0.1"
    )
    tenant = TestClient(
        create_app(UiSettings(store, Viewers(tokens), clock_ns=lambda: now_ns)),
        base_url="http://ui.example", headers={"Authorization": "Bearer bench-token"},
    )  # fmt: skip
    return Bench(store, data_dir, operator, tenant, now_ns)


def settle(store: ClientStore, limit_s: float) -> float:
    """Wait until no merge runs (at most `limit_s`); returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if not store.query("SELECT count() FROM system.merges").rows[0][0]:
            break
        time.sleep(2)
    return time.perf_counter() - started


WARM_BOUND_MS, COLD_BOUND_MS = 300, 2000
"""Issue 46's bounds on every page and read: p95 server time warm, and cold."""


def _short(size: int) -> str:
    """`size` spans, shortly: 1M, 10M, 30,000."""
    return f"{size // 10**6}M" if size % 10**6 == 0 else f"{size:,}"


def report(
    size: int, figures: dict[str, Figures], bases: list[tuple[int, dict[str, Figures]]]
) -> None:
    """One size's table: each request's figures and their ratios to each of `bases` (the
    first size's and the previous size's figures)."""
    print(f"\n== {size:,} spans (x: ratios to " + ", ".join(f"{b:,}" for b, _ in bases) + ")")
    heads = ("p50", "p95", "max", "cold50", "coldmx", "rows", "MB", "coldMB", "warm")
    widths = (7, 7, 7, 7, 7, 11, 7, 7, 4)
    ratios = [f"x{_short(b)} {h}" for b, _ in bases for h in ("p95", "cold", "rows")]
    print(f"{'request':<36} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))
          + "".join(f" {r:>10}" for r in ratios))  # fmt: skip
    for name, f in figures.items():
        if f.error:
            print(f"{name:<36} FAILED: {f.error}", flush=True)
            continue
        rows, megabytes = statistics.median(f.rows), statistics.median(f.bytes) / 1e6
        disk = statistics.median(f.disk_bytes) / 1e6 if f.disk_bytes else math.nan
        shown = ""
        for _, base in bases:
            b = base[name]
            if b.error:
                shown += f" {'-':>10}" * 3
                continue
            shown += (f" {f.p(0.95) / b.p(0.95):10.2f} {f.p(1.0, True) / b.p(1.0, True):10.2f}"
                      f" {rows / max(1, statistics.median(b.rows)):10.2f}")  # fmt: skip
        print(
            f"{name:<36} {f.p(0.5):7.1f} {f.p(0.95):7.1f} {max(f.warm_ms):7.1f} "
            f"{f.p(0.5, True):7.1f} {f.p(1.0, True):7.1f} {rows:11,.0f} {megabytes:7.1f} "
            f"{disk:7.1f} {len(f.warm_ms):4}{shown}",
            flush=True,
        )
    over = sorted(
        ((f.p(0.95), f.p(1.0, True), name) for name, f in figures.items()
         if not f.error and (f.p(0.95) > WARM_BOUND_MS or f.p(1.0, True) > COLD_BOUND_MS)),
        reverse=True,
    )  # fmt: skip
    print(f"{size:,}: {len(over)} requests over {WARM_BOUND_MS} ms p95 warm or "
          f"{COLD_BOUND_MS:,} ms cold, slowest first: "
          + "; ".join(f"{name} {p95:,.0f}/{cold:,.0f}" for p95, cold, name in over))  # fmt: skip


def scale_mode(args: argparse.Namespace) -> None:
    """Build the store to each size and time every request at each."""
    sizes = sorted(int(size) for size in args.sizes.split(","))
    only = [text for text in args.only.split(",") if text]
    requests = [r for r in REQUESTS if not only or any(text in r.name for text in only)]
    with tempfile.TemporaryDirectory(prefix="pathgrade-reads-scale-") as scratch:
        data_dir = args.data_dir or Path(scratch)
        engine = (
            engine_bounds(args.store_memory_mb, args.store_cache_mb)
            if args.store_memory_mb
            else None
        )
        bench = open_bench(data_dir, engine)
        store = bench.store
        if not store.query("EXISTS TABLE bench_seed").rows[0][0]:
            started = time.perf_counter()
            seeded = scale_store.seed(store, args.seed_spans)
            print(f"seed: {seeded:,} spans through the store writer's SQL insert "
                  f"in {time.perf_counter() - started:.0f} s")  # fmt: skip
        results: dict[int, dict[str, Figures]] = {}
        for size in sizes:
            scale_store.reset_peak_rss()
            started, cpu = time.perf_counter(), time.process_time()
            stored = scale_store.grow(store, size)
            built = time.perf_counter() - started
            waited = settle(store, args.settle_s)
            cpu = time.process_time() - cpu
            build_peak = scale_store.pid_rss_mb("VmHWM")
            counts = {
                table: store.query(f"SELECT count() FROM {table}").rows[0][0]
                for table in ("spans", "trace_roots", "alerts", "scores", "span_counts")
            }
            disk = store.query(
                "SELECT sum(bytes_on_disk) FROM system.parts WHERE active "
                "AND database = currentDatabase()"
            ).rows[0][0]
            tables = ", ".join(f"{table} {n:,}" for table, n in counts.items())
            print(f"\n{size:,}: grown to {stored:,} spans in {built:.0f} s, merges settled in "
                  f"{waited:.0f} s ({cpu:.0f} s of CPU, every thread); {tables}; "
                  f"{disk / 1e9:.2f} GB on disk; peak RSS while built "
                  f"{build_peak:,.0f} MB")  # fmt: skip
            s = samples(store, bench.now_ns)
            scale_store.reset_peak_rss()
            results[size] = {}
            for request in requests:
                results[size][request.name] = bench.measure(
                    request, s, args.repeats, args.cold, args.budget_s
                )
            print(f"{size:,}: peak RSS while read {scale_store.pid_rss_mb('VmHWM'):,.0f} MB, "
                  f"now {scale_store.pid_rss_mb():,.0f} MB")  # fmt: skip
            earlier = sorted({sizes[0], sizes[max(0, sizes.index(size) - 1)]})
            report(size, results[size], [(b, results[b]) for b in earlier])
        tenant_share(results, sizes, store)
        store.close()
    print(f"\nmax RSS of this process over the run: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")  # fmt: skip


AGAINST_HEAD = (
    f"{'request':<36} {'p50':>7} {'p95':>7} {'cold':>7} {'rows':>11} | {'REV p50':>7} "
    f"{'p95':>7} {'cold':>7} {'rows':>11} | {'p95 x':>6} {'rows x':>6}"
)
"""The columns of `scale --against`: this checkout's, REV's, this / REV."""
MODES = ("cold", "untimed", "warm")
"""What a worker (`serve`) does with one call: cold (caches dropped first) and timed, warm
and not timed (the warm-up), warm and timed."""


def serve_mode(args: argparse.Namespace) -> None:
    """One side of `scale --against`: the store in `--data-dir` (migrated by this process's
    `pathgrade`), then one JSON line in per call, one out. The first line in is the samples
    (null: draw them here; the answer is the samples drawn), each next one a call
    (`{"name", "index", "mode"}`, a mode of MODES), answered with its ms, rows, bytes and
    compressed bytes read, or its error."""
    engine = (
        engine_bounds(args.store_memory_mb, args.store_cache_mb) if args.store_memory_mb else None
    )
    bench = open_bench(args.data_dir, engine)
    drawn = json.loads(sys.stdin.readline())
    if drawn is None:
        s = samples(bench.store, bench.now_ns)
    else:
        s = Samples(**drawn)
        s.traces = [tuple(pair) for pair in s.traces]  # type: ignore[misc]
    spans = bench.store.query("SELECT count() FROM spans").rows[0][0]
    code = str(Path(create_app.__code__.co_filename).parents[2])  # the checkout read through
    print(json.dumps({"samples": dataclasses.asdict(s), "spans": spans, "code": code}), flush=True)
    by_name = {request.name: request for request in REQUESTS}
    for line in sys.stdin:
        call = json.loads(line)
        request, answer = by_name[call["name"]], {}
        try:
            if call["mode"] == "untimed":
                bench.call(request, s, call["index"])
            else:
                if call["mode"] == "cold":
                    bench.make_cold()
                elapsed, read = bench.timed(request, s, call["index"])
                answer = {"ms": elapsed, **read}
        except (RequestFailed, QueryError) as exc:
            answer = {"error": str(exc).splitlines()[0][:300]}
        print(json.dumps(answer), flush=True)
    bench.store.close()


class Side:
    """A `serve` process of one checkout on its own copy of the store."""

    def __init__(self, label: str, python: str, data_dir: Path, args: argparse.Namespace) -> None:
        self.label = label
        command = [python, str(Path(__file__).resolve()), "serve", "--data-dir", str(data_dir)]
        if args.store_memory_mb:
            command += ["--store-memory-mb", str(args.store_memory_mb),
                        "--store-cache-mb", str(args.store_cache_mb)]  # fmt: skip
        self.process = subprocess.Popen(
            ["nice", "-n", "19", *command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True, bufsize=1,
        )  # fmt: skip

    def ask(self, message: object) -> dict[str, Any]:
        """Send one line, read the answer (the process's exit is an error)."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(message) + "\n")
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label}: the serving process ended ({self.process.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=120)


def migrations_differ(rev: str) -> list[str]:
    """The migration files only one of this checkout and the commit `rev` has (or whose
    text differs): empty when both migrate alike, or when `rev` is not a commit."""
    repo = Path(__file__).resolve().parents[1]
    listed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", rev, "--", "schemas/migrations"],
        capture_output=True, text=True,
    )  # fmt: skip
    return listed.stdout.split() if listed.returncode == 0 else []


def against_mode(args: argparse.Namespace) -> None:
    """This checkout's reads against REV's on copies of the kept store, calls alternating."""
    from ingest import baseline_python  # its heavy imports only for this mode

    if args.data_dir is None or not args.data_dir.is_dir():
        raise SystemExit("--against: --data-dir must name a store `scale` kept")
    only = [text for text in args.only.split(",") if text]
    requests = [r for r in REQUESTS if not only or any(text in r.name for text in only)]
    other_python = baseline_python(args.against)
    differ = migrations_differ(args.against)
    if differ:
        print(f"migrations differ from {args.against}'s: {', '.join(differ)}; each side "
              "migrates its own copy with its own")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="reads-against-", dir=args.data_dir.parent) as tmp:
        sides: list[Side] = []
        for label, python in (("this", sys.executable), ("against", other_python)):
            copy = Path(tmp, label)
            shutil.copytree(args.data_dir, copy, symlinks=True)
            sides.append(Side(label, python, copy, args))
        try:
            first = sides[0].ask(None)
            second = sides[1].ask(first["samples"])
            print(f"this: {first['code']}, {first['spans']:,} spans; "
                  f"against: {second['code']}, {second['spans']:,} spans")  # fmt: skip
            print(AGAINST_HEAD)
            figures = {r.name: (Figures(), Figures()) for r in requests}
            for request in requests:
                calls = [("cold", i) for i in range(args.cold)] + [("untimed", args.repeats)]
                calls += [("warm", i) for i in range(args.repeats)]
                for mode, index in calls:
                    for side, f in zip(sides, figures[request.name], strict=True):
                        if f.error:
                            continue
                        answer = side.ask({"name": request.name, "index": index, "mode": mode})
                        if "error" in answer:
                            f.error = answer["error"]
                        elif mode == "cold":
                            f.cold_ms.append(answer["ms"])
                        elif mode == "warm":
                            f.warm_ms.append(answer["ms"])
                            f.rows.append(answer["SelectedRows"])
                print_against(request.name, *figures[request.name])
        finally:
            for side in sides:
                side.close()


def print_against(name: str, this: Figures, other: Figures) -> None:
    """One request's line of `scale --against` (under AGAINST_HEAD)."""
    if this.error or other.error:
        print(f"{name:<36} FAILED: this {this.error or '-'}; against {other.error or '-'}")
        return
    shown = [
        f"{f.p(0.5):7.0f} {f.p(0.95):7.0f} {f.p(1.0, True):7.0f} {statistics.median(f.rows):11,.0f}"
        for f in (this, other)
    ]
    rows = statistics.median(this.rows) / max(1, statistics.median(other.rows))
    print(f"{name:<36} {shown[0]} | {shown[1]} | {this.p(0.95) / other.p(0.95):6.2f} {rows:6.2f}",
          flush=True)  # fmt: skip


def queries_of(
    bench: Bench, request: Request, s: Samples
) -> list[tuple[str, dict[str, Any] | None]]:
    """The queries (text and parameters) one call of `request` runs on the store."""
    recorded: list[tuple[str, dict[str, Any] | None]] = []
    run = bench.store.query

    def recording(
        sql: str, parameters: dict[str, Any] | None = None, *more: Any, **named: Any
    ) -> Any:
        recorded.append((sql, parameters))
        return run(sql, parameters, *more, **named)

    bench.store.query = recording  # type: ignore[method-assign]
    try:
        bench.call(request, s, 0)
    finally:
        bench.store.query = run  # type: ignore[method-assign]
    return recorded


def explain_mode(args: argparse.Namespace) -> None:
    """Each query the requests of `--only` run on the store in `--data-dir`, the slowest
    first: its ms and rows read run alone (warm, after one untimed run), its text, and for
    the `--top` slowest of each request ClickHouse's `EXPLAIN indexes = 1` (the plan, its
    columns left out, and the parts and granules each index keeps). Queries of a tenant's viewer run
    here without its session's filter."""
    only = [text for text in args.only.split(",") if text]
    bench = open_bench(args.data_dir, None)
    store = bench.store
    s = samples(store, bench.now_ns)
    for request in [r for r in REQUESTS if any(text in r.name for text in only)]:
        recorded = queries_of(bench, request, s)
        timed = []
        for sql, parameters in recorded:
            store.query(sql, parameters)
            before = read_counts(store)
            started = time.perf_counter()
            store.query(sql, parameters)
            elapsed = (time.perf_counter() - started) * 1000
            rows = read_counts(store)["SelectedRows"] - before["SelectedRows"]
            timed.append((elapsed, rows, sql, parameters))
        timed.sort(key=lambda item: item[0], reverse=True)
        print(f"\n== {request.name}: {len(timed)} queries")
        for rank, (elapsed, rows, sql, parameters) in enumerate(timed):
            print(f"-- {elapsed:,.0f} ms, {rows:,} rows read: {' '.join(sql.split())[:600]}")
            if rank < args.top:
                plan = store.query("EXPLAIN indexes = 1 " + sql, parameters).rows
                print("\n".join(f"     {line}" for (line,) in plan if "Output: " not in line))
    store.close()


def tenant_share(
    results: dict[int, dict[str, Figures]], sizes: list[int], store: ClientStore
) -> None:
    """TENANT's viewer's rows read against the operator's, per paired request, beside
    TENANT's share of the spans."""
    share = store.query(
        "SELECT countIf(Tenant = {t:String}) / count() FROM spans", {"t": TENANT}
    ).rows[0][0]
    print(f"\n{TENANT}'s share of the spans: {share:.2f}; its viewer's rows read / the operator's:")
    for size in sizes:
        measured = {name: f for name, f in results[size].items() if not f.error}
        pairs = [
            (name, name.replace(" (tenant)", ""))
            for name in measured if name.endswith(" (tenant)")
        ]  # fmt: skip
        shown = ", ".join(
            f"{own}: {statistics.median(measured[name].rows) / max(1, statistics.median(measured[own].rows)):.2f}"  # noqa: E501
            for name, own in pairs if own in measured
        )  # fmt: skip
        print(f"  {size:,}: {shown}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    cpu = modes.add_parser("cpu", help="CPU per query, reader session against writer")
    cpu.add_argument("--queries", type=int, default=300)
    cpu.add_argument("--rounds", type=int, default=3)
    scale = modes.add_parser("scale", help="every page and read on stores of growing size")
    scale.add_argument("--sizes", default="30000,90000", help="spans, comma-separated")
    scale.add_argument("--seed-spans", type=int, default=20_000)
    scale.add_argument("--repeats", type=int, default=20)
    scale.add_argument("--cold", type=int, default=3)
    scale.add_argument("--data-dir", type=Path, help="keep (and reuse) the store here")
    for flag, kind, default, text in (
        ("--budget-s", float, 600, "no more warm calls of a request once its calls took this"
         " long (one at least)"),
        ("--settle-s", float, 1800, "wait at most this long for merges per size"),
        ("--store-memory-mb", int, 0, "bound the engine as the stack's store owner (its"
         " --store-memory-mb); 0: unbounded"),
        ("--store-cache-mb", int, 128, "with --store-memory-mb: each cache's bound"),
    ):  # fmt: skip
        scale.add_argument(flag, type=kind, default=default, help=text)
    scale.add_argument(
        "--only", default="", help="only the requests whose name has one of these (a,b,...)"
    )
    scale.add_argument(
        "--against", metavar="REV|PYTHON",
        help="this checkout's reads against REV's on copies of --data-dir's store",
    )  # fmt: skip
    serve = modes.add_parser("serve", help="one side of scale --against (JSON lines)")
    serve.add_argument("--data-dir", type=Path, required=True)
    serve.add_argument("--store-memory-mb", type=int, default=0)
    serve.add_argument("--store-cache-mb", type=int, default=128)
    explain = modes.add_parser("explain", help="each query of some requests, and its plan")
    explain.add_argument("--data-dir", type=Path, required=True, help="a store `scale` kept")
    explain.add_argument("--only", required=True, help="the requests whose name has one of these")
    explain.add_argument("--top", type=int, default=2, help="EXPLAIN the slowest this many")
    args = parser.parse_args()
    if args.mode == "scale" and args.against:
        args.mode = "against"
    modes_run = {"cpu": cpu_mode, "scale": scale_mode, "explain": explain_mode}
    modes_run |= {"serve": serve_mode, "against": against_mode}
    modes_run[args.mode](args)


if __name__ == "__main__":
    main()
