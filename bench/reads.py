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
built and while it was read (VmHWM, reset between). Each size's figures are printed as a
ratio to the first size's.

    python bench/reads.py scale [--sizes 1000000,10000000] [--seed-spans 20000]
                                [--repeats 20] [--cold 3] [--data-dir DIR] [--only TEXT,...]
    python bench/reads.py cpu [--queries 300] [--rounds 3]

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
import itertools
import math
import resource
import statistics
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
    open_client_store,
)
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
    )


@dataclass(frozen=True)
class Request:
    """One request, its parameters varied by the call's index: a UI path (`page`, as the
    operator or as TENANT's viewer) or a typed read (`read`)."""

    name: str
    page: Callable[[Samples, int], str] | None = None
    read: Callable[[ClientStore, Samples, int], object] | None = None
    tenant: bool = False


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
            "SELECT GenAIOperation, count() FROM spans FINAL GROUP BY 1", readonly=True
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

    def p(self, q: float, cold: bool = False) -> float:
        """The `q` quantile (nearest rank) of the warm (or cold) times, ms."""
        times = sorted(self.cold_ms if cold else self.warm_ms)
        return times[max(0, math.ceil(q * len(times)) - 1)] if times else math.nan


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
            raise SystemExit(
                f"{request.name}: GET {path} -> {answer.status_code}\n{answer.text[:400]}"
            )

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

    def measure(self, request: Request, s: Samples, repeats: int, cold: int) -> Figures:
        figures = Figures()
        for index in range(cold):
            self.make_cold()
            elapsed, read = self.timed(request, s, index)
            figures.cold_ms.append(elapsed)
            figures.disk_bytes.append(read["ReadCompressedBytes"])
        self.call(request, s, repeats)  # warm-up, untimed
        for index in range(repeats):
            elapsed, read = self.timed(request, s, index)
            figures.warm_ms.append(elapsed)
            figures.rows.append(read["SelectedRows"])
            figures.bytes.append(read["SelectedBytes"])
        return figures


def open_bench(data_dir: Path) -> Bench:
    store = open_client_store(embedded_dsn(str(data_dir)))
    migrate(store.client)
    tokens = data_dir / "viewer-tokens.yaml"
    tokens.write_text(f"bench-token: {TENANT}\n")
    now_ns = time.time_ns()
    operator = TestClient(
        create_app(UiSettings(store, clock_ns=lambda: now_ns)), base_url="http://127.0.0.1"
    )
    tenant = TestClient(
        create_app(UiSettings(store, Viewers(tokens), clock_ns=lambda: now_ns)),
        base_url="http://ui.example", headers={"Authorization": "Bearer bench-token"},
    )  # fmt: skip
    return Bench(store, data_dir, operator, tenant, now_ns)


def settle(store: ClientStore, limit_s: float = 600) -> float:
    """Wait until no merge runs (at most `limit_s`); returns the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if not store.query("SELECT count() FROM system.merges").rows[0][0]:
            break
        time.sleep(2)
    return time.perf_counter() - started


def report(
    size: int, figures: dict[str, Figures], base_size: int, base: dict[str, Figures]
) -> None:
    """One size's table: each request's figures and its ratios to the first size's."""
    print(f"\n== {size:,} spans (ratios: to {base_size:,})")
    heads = ("p50", "p95", "max", "cold50", "coldmx", "rows", "MB", "coldMB", "x p95", "x cold")
    widths = (7, 7, 7, 7, 7, 11, 7, 7, 6, 6)
    print(f"{'request':<36} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths, strict=True))
          + f" {'x rows':>7}")  # fmt: skip
    for name, f in figures.items():
        b = base[name]
        rows, megabytes = statistics.median(f.rows), statistics.median(f.bytes) / 1e6
        disk = statistics.median(f.disk_bytes) / 1e6 if f.disk_bytes else math.nan
        print(
            f"{name:<36} {f.p(0.5):7.1f} {f.p(0.95):7.1f} {max(f.warm_ms):7.1f} "
            f"{f.p(0.5, True):7.1f} {f.p(1.0, True):7.1f} {rows:11,.0f} {megabytes:7.1f} "
            f"{disk:7.1f} "
            f"{f.p(0.95) / b.p(0.95):6.2f} {f.p(1.0, True) / b.p(1.0, True):6.2f} "
            f"{rows / max(1, statistics.median(b.rows)):7.2f}",
            flush=True,
        )


def scale_mode(args: argparse.Namespace) -> None:
    """Build the store to each size and time every request at each."""
    sizes = sorted(int(size) for size in args.sizes.split(","))
    only = [text for text in args.only.split(",") if text]
    requests = [r for r in REQUESTS if not only or any(text in r.name for text in only)]
    with tempfile.TemporaryDirectory(prefix="pathgrade-reads-scale-") as scratch:
        data_dir = args.data_dir or Path(scratch)
        bench = open_bench(data_dir)
        store = bench.store
        if not store.query("EXISTS TABLE bench_seed").rows[0][0]:
            started = time.perf_counter()
            seeded = scale_store.seed(store, args.seed_spans)
            print(f"seed: {seeded:,} spans through the store writer's SQL insert "
                  f"in {time.perf_counter() - started:.0f} s")  # fmt: skip
        results: dict[int, dict[str, Figures]] = {}
        for size in sizes:
            scale_store.reset_peak_rss()
            started = time.perf_counter()
            stored = scale_store.grow(store, size)
            built = time.perf_counter() - started
            waited = settle(store)
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
                  f"{waited:.0f} s; {tables}; {disk / 1e9:.2f} GB on disk; "
                  f"peak RSS while built {build_peak:,.0f} MB")  # fmt: skip
            s = samples(store, bench.now_ns)
            scale_store.reset_peak_rss()
            results[size] = {}
            for request in requests:
                results[size][request.name] = bench.measure(request, s, args.repeats, args.cold)
            print(f"{size:,}: peak RSS while read {scale_store.pid_rss_mb('VmHWM'):,.0f} MB, "
                  f"now {scale_store.pid_rss_mb():,.0f} MB")  # fmt: skip
            report(size, results[size], sizes[0], results[sizes[0]])
        tenant_share(results, sizes, store)
        store.close()
    print(f"\nmax RSS of this process over the run: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")  # fmt: skip


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
        pairs = [
            (name, name.replace(" (tenant)", ""))
            for name in results[size] if name.endswith(" (tenant)")
        ]  # fmt: skip
        shown = ", ".join(
            f"{own}: {statistics.median(results[size][name].rows) / max(1, statistics.median(results[size][own].rows)):.2f}"  # noqa: E501
            for name, own in pairs if own in results[size]
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
    scale.add_argument(
        "--only", default="", help="only the requests whose name has one of these (a,b,...)"
    )
    args = parser.parse_args()
    (cpu_mode if args.mode == "cpu" else scale_mode)(args)


if __name__ == "__main__":
    main()
