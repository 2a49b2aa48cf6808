"""Side by side with Arize Phoenix: the same GenAI traffic through pathgrade's embedded
stack and Phoenix's server, one after the other, with memory and CPU per process.

Each system starts fresh on free loopback ports with its default settings (pathgrade:
`pathgrade up` with a temporary data directory, as bench/ingest.py starts it; Phoenix:
`phoenix serve` of arize-phoenix PHOENIX_VERSION, from a venv of its own, never
pathgrade's, built once under PEERS_DIR or given as `--phoenix-python`) and gets the
same requests of bench/ingest.py's realistic mix over OTLP/HTTP protobuf (its bodies and
senders):

1. a warm-up of WARM_UP_TRACES traces, waited for (so the first insert's imports and
   pathgrade's first consumer-group joins are not the idle or the burst);
2. idle: `--settle` seconds; CPU over them, then RSS of every process;
3. a burst of `--spans` spans as fast as the server answers, every process sampled every
   0.2 s (bench/memory.py's sampler) until everything is stored;
4. after `--settle` seconds, a steady `--rate` spans/s for `--seconds` seconds (paced:
   one `--batch` request as it falls due), until everything is stored;
5. pathgrade only, after `--settle` seconds: a large load of `--large-spans` spans as
   fast as the collector answers (bench/ingest.py's default run), the figure issue 46's
   targets are relative to (0 skips it).

"Stored" is, for pathgrade, every span in the store and every trace evaluated by the
realtime plane (bench/ingest.py's wait); for Phoenix, every span a row of `spans` in its
SQLite database (read-only from this process, so the counting costs Phoenix nothing).
CPU per span of a phase is the CPU of every process of the system from the phase's first
request until everything is stored, over the phase's spans: the idle time between paced
requests is counted. Phoenix runs offline: loopback only, its own temporary working
directory and database (PHOENIX_WORKING_DIR), telemetry pixels off
(PHOENIX_TELEMETRY_ENABLED) and no public-internet request of its own
(PHOENIX_ALLOW_EXTERNAL_RESOURCES); the bench checks both systems' sockets after every
phase and prints any connection to an address off the loopback.

    python bench/peers.py [--spans 20000] [--rate 500] [--seconds 30] [--settle 10]
                          [--large-spans 200000] [--batch 512] [--senders 4]
                          [--phoenix-python PATH]

Figures: docs/scale.md ("Side by side with Arize Phoenix").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest
from memory import Memory, Sampler, read_memory
from pathgrade.batch_plane.store.remote import RemoteStore

from pathgrade.stack.broker import free_port
from pathgrade.stack.options import StackOptions

PHOENIX_VERSION = "20.26.1"
PEERS_DIR = Path(tempfile.gettempdir()) / "pathgrade-peers"
"""Where `phoenix_python` keeps the venv it builds, once."""
START_LIMIT_S = 300.0
_MB = 1024 * 1024
TARGETS = {  # issue 46, pathgrade's whole stack: the figure's name -> (bound, strict)
    "idle RSS, MB": (500.0, False),
    "burst peak RSS, MB": (1024.0, True),
    "burst CPU / large-load CPU": (1.5, False),
    "steady CPU / large-load CPU": (1.5, False),
}


# --------------------------------------------------------------------------- the systems


class System(Protocol):
    """A server under test, started on `port` (OTLP/HTTP)."""

    label: str
    version: str
    port: int

    def processes(self) -> dict[int, str]:
        """pid -> row name ("role: process") of every process of the system now."""
        ...

    def stored(self, spans: int, traces: int) -> bool:
        """Whether `spans` spans in `traces` traces (all sent so far) are stored."""
        ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass
class Pathgrade:
    """`pathgrade up` of this checkout, as bench/ingest.py starts it."""

    data_dir: Path
    port: int
    label: str = "pathgrade"
    version: str = ""
    process: subprocess.Popen | None = None
    store: RemoteStore | None = None

    def start(self) -> None:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        self.version = f"{version('pathgrade')} at {commit}"
        niceness = StackOptions.model_fields["store_writer_niceness"].default
        variant = ingest.Variant(self.label, sys.executable)
        self.process = ingest.start_stack(variant, self.data_dir, self.port, niceness)
        state = json.loads((self.data_dir / "stack.json").read_text())
        self.store = RemoteStore(state["query_url"], state.get("token", ""))

    def processes(self) -> dict[int, str]:
        assert self.process is not None
        tree = ingest.process_tree(self.process.pid, self.data_dir)
        return {pid: f"{ingest.role_of(name)}: {name}" for pid, name in tree.items()}

    def stored(self, spans: int, traces: int) -> bool:
        assert self.store is not None
        snapshot = ingest.stack_snapshot(self.data_dir)
        counted = ingest.realtime_evaluated(snapshot)
        return (
            counted is not None
            and counted[0] >= traces
            and ingest.stored_all(self.store, spans, snapshot)
        )

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=180)


@dataclass
class Phoenix:
    """Arize Phoenix's server (`phoenix serve`) of the venv of `python`, offline."""

    python: str
    work_dir: Path
    port: int
    label: str = "Phoenix"
    version: str = ""
    process: subprocess.Popen | None = None

    def start(self) -> None:
        self.version = subprocess.run(
            [self.python, "-c", "from importlib.metadata import version as v; "
             "print(v('arize-phoenix'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        log_path = self.work_dir / "phoenix.log"
        with log_path.open("w") as log:  # the child writes to its own copy
            self.process = subprocess.Popen(
                [self.python, "-m", "phoenix.server.main", "serve"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.work_dir,
                env=phoenix_env(os.environ, self.work_dir, self.port, free_port()),
            )  # fmt: skip
        deadline = time.perf_counter() + START_LIMIT_S
        while "Application startup complete" not in log_path.read_text(errors="replace"):
            if self.process.poll() is not None or time.perf_counter() > deadline:
                self.stop()
                raise SystemExit(f"phoenix serve did not start:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.2)

    def processes(self) -> dict[int, str]:
        assert self.process is not None
        tree = ingest.process_tree(self.process.pid)
        tree[self.process.pid] = "phoenix serve"
        return {pid: f"phoenix: {name}" for pid, name in tree.items()}

    def stored(self, spans: int, traces: int) -> bool:
        return phoenix_span_count(self.work_dir / "phoenix.db") >= spans

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=180)


def phoenix_env(
    environ: dict[str, str] | os._Environ, work_dir: Path, port: int, grpc_port: int
) -> dict[str, str]:
    """The environment of Phoenix's server: this one without any PHOENIX_ setting of the
    caller's, plus loopback ports, `work_dir` for its data (its SQLite database too), no
    telemetry pixels and no public-internet request of its own (web fonts, telemetry, the
    WASM sandbox's download)."""
    env = {k: v for k, v in environ.items() if not k.startswith("PHOENIX_")}
    return env | {
        "PHOENIX_WORKING_DIR": str(work_dir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }


def phoenix_span_count(database: Path) -> int:
    """Rows of Phoenix's `spans` table (0 before its migrations made it)."""
    if not database.exists():
        return 0
    with suppress(sqlite3.OperationalError):  # no table yet, or a writer's lock
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
        try:
            return connection.execute("SELECT count(*) FROM spans").fetchone()[0]
        finally:
            connection.close()
    return 0


def phoenix_python(given: str | None) -> str:
    """`given` (a python whose venv has arize-phoenix), else the python of a venv with
    arize-phoenix PHOENIX_VERSION under PEERS_DIR, built once (from the package registry)."""
    if given:
        if not Path(given).is_file():
            raise SystemExit(f"--phoenix-python {given}: no such file")
        return given
    home = PEERS_DIR / f"phoenix-{PHOENIX_VERSION}"
    python, done = home / ".venv" / "bin" / "python", home / "installed"
    if done.is_file():
        return str(python)
    print(f"installing arize-phoenix=={PHOENIX_VERSION} into {home}/.venv ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home / ".venv")], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", f"arize-phoenix=={PHOENIX_VERSION}"]
    subprocess.run(pip, check=True)
    done.write_text(PHOENIX_VERSION)
    return str(python)


# --------------------------------------------------------------------------- measuring


def cpu_now(system: System) -> dict[str, float]:
    """CPU seconds so far of every process of the system, by "row [pid]"."""
    out = {}
    for pid, row in system.processes().items():
        with suppress(OSError):  # gone since
            out[f"{row} [{pid}]"] = ingest.process_cpu_s(pid)
    return out


def cpu_since(system: System, before: dict[str, float]) -> dict[str, float]:
    """CPU seconds of every process since `before` (a process started since: all of it)."""
    return {name: s - before.get(name, 0.0) for name, s in cpu_now(system).items()}


def memory_now(system: System) -> dict[str, Memory]:
    """Memory of every process of the system now, by "row [pid]"."""
    out = {}
    for pid, row in system.processes().items():
        if (memory := read_memory(pid)) is not None:
            out[f"{row} [{pid}]"] = memory
    return out


def off_loopback(table: str, inodes: set[str]) -> list[str]:
    """Remote "address:port" of the sockets in `inodes` (a process's open sockets) that
    a /proc/net/tcp or tcp6 `table` shows connected to an address off the loopback."""
    out = []
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[9] not in inodes:
            continue
        address, port = fields[2].split(":")
        if int(port, 16) == 0:  # a listening socket
            continue
        raw = bytes.fromhex(address)
        # each 32-bit word is in host order (little-endian here)
        ip = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
        if len(ip) == 16 and ip[:12] == b"\0" * 10 + b"\xff\xff":  # IPv4 mapped into IPv6
            ip = ip[12:]
        if ip[0] == 127 or ip == b"\0" * 15 + b"\1":
            continue
        shown = ".".join(map(str, ip)) if len(ip) == 4 else ip.hex(":", 2)
        out.append(f"{shown}:{int(port, 16)}")
    return out


def outbound(system: System) -> list[str]:
    """Connections of the system's processes to addresses off the loopback, now."""
    out = []
    for pid in system.processes():
        with suppress(OSError):
            links = (os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir())
            inodes = {link[8:-1] for link in links if link.startswith("socket:[")}
            for name in ("tcp", "tcp6"):
                out += off_loopback(Path(f"/proc/{pid}/net/{name}").read_text(), inodes)
    return out


@dataclass
class Phase:
    """One load through one system: its spans, seconds from its first request until all
    stored, CPU seconds and peak RSS by process."""

    spans: int
    seconds: float
    cpu_s: dict[str, float]
    peak_rss: dict[str, int] = field(default_factory=dict)
    peak_total_rss: int = 0
    resent: int = 0  # requests refused at capacity or cut by the server, sent again

    def cpu_us_per_span(self, names: list[str] | None = None) -> float:
        chosen = self.cpu_s if names is None else {n: self.cpu_s.get(n, 0.0) for n in names}
        return sum(chosen.values()) / self.spans * 1e6


@dataclass
class Result:
    """What one system did through the whole run."""

    label: str
    version: str
    idle_rss: dict[str, int]
    idle_cores: float
    phases: dict[str, Phase]
    outbound: list[str]


def send(system: System, bodies: list[bytes], senders: int, rate: float | None = None) -> int:
    """Send the bodies as an OTel exporter would (a request refused at capacity sent again
    a second later, one on a connection the server closed sent again on a new one); the
    number of requests sent again."""
    return ingest.send_all(
        system.port, [(ingest.TRACES_PATH, b) for b in bodies], senders, rate, retry=True
    )


def wait_stored(system: System, spans: int, traces: int) -> None:
    started = time.perf_counter()
    while not system.stored(spans, traces):
        if time.perf_counter() - started > ingest.WAIT_LIMIT_S:
            raise SystemExit(f"{system.label}: did not store {spans} spans in time")
        time.sleep(0.1)


def load(
    system: System, bodies: list[bytes], sent: list[int], args, rate: float | None = None
) -> Phase:
    """Send `bodies` (paced at `rate` spans/s, else as fast as answered) and wait until
    the system stored them; `sent` holds the spans and traces sent before, and grows."""
    sent[0] += ingest.span_count(bodies)
    sent[1] += ingest.trace_count(bodies)
    before = cpu_now(system)
    sampler = Sampler(lambda: memory_now(system))
    sampler.start()
    started = time.perf_counter()
    try:
        resent = send(system, bodies, args.senders, rate)
        wait_stored(system, *sent)
    finally:
        sampler.stop()
    seconds = time.perf_counter() - started
    phase = Phase(ingest.span_count(bodies), seconds, cpu_since(system, before), resent=resent)
    phase.peak_rss, phase.peak_total_rss = sampler.peak_rss, sampler.peak_total_rss
    return phase


def run_system(system: System, loads: dict[str, list[bytes]], args) -> Result:
    """The run's phases through one started system (`loads`: warm-up, burst, steady and,
    where given, large), then the system stopped."""
    seen: list[str] = []
    try:
        sent = [0, 0]
        load(system, loads["warm-up"], sent, args)
        before, started = cpu_now(system), time.perf_counter()
        time.sleep(args.settle)
        idle_cpu = sum(cpu_since(system, before).values()) / (time.perf_counter() - started)
        idle = {name: m.rss for name, m in memory_now(system).items()}
        seen += outbound(system)
        phases = {}
        for name in ("burst", "steady", "large"):
            if name not in loads:
                continue
            if phases:
                time.sleep(args.settle)
            print(f"  {system.label}: {name} ...", flush=True)
            rate = args.rate if name == "steady" else None
            phases[name] = load(system, loads[name], sent, args, rate)
            seen += outbound(system)
    finally:
        system.stop()
    return Result(system.label, system.version, idle, idle_cpu, phases, seen)


# --------------------------------------------------------------------------- the tables


def row_of(name: str) -> str:
    """The table row of a "role: process [pid]" name: its role."""
    return name.split(":", 1)[0]


def by_row(values: dict[str, float] | dict[str, int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in values.items():
        out[row_of(name)] = out.get(row_of(name), 0.0) + value
    return out


def process_table(result: Result) -> list[str]:
    """Markdown rows of one system's figures per process role and for the whole of it."""
    phases = result.phases
    columns = ["idle RSS MB", "burst peak RSS MB"]
    columns += [f"CPU µs/span {name}" for name in phases]
    lines = [f"| {result.label} process | " + " | ".join(columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")
    idle = by_row(result.idle_rss)
    peak = by_row(phases["burst"].peak_rss)
    cpu = {name: by_row(phase.cpu_s) for name, phase in phases.items()}
    rows = sorted({*idle, *peak, *(r for c in cpu.values() for r in c)})
    for row in rows:
        values = [f"{idle.get(row, 0) / _MB:.0f}", f"{peak.get(row, 0) / _MB:.0f}"]
        values += [f"{cpu[n].get(row, 0.0) / p.spans * 1e6:.1f}" for n, p in phases.items()]
        lines.append(f"| {row} | " + " | ".join(values) + " |")
    totals = [f"{sum(idle.values()) / _MB:.0f}", f"{phases['burst'].peak_total_rss / _MB:.0f}"]
    totals += [f"{p.cpu_us_per_span():.1f}" for p in phases.values()]
    lines.append("| whole | " + " | ".join(totals) + " |")
    return lines


def whole(result: Result) -> dict[str, float]:
    """The whole system's figures the side-by-side table compares."""
    burst, steady = result.phases["burst"], result.phases["steady"]
    return {
        "idle RSS, MB": sum(result.idle_rss.values()) / _MB,
        "idle CPU, % of a core": result.idle_cores * 100,
        "burst peak RSS, MB": burst.peak_total_rss / _MB,
        "burst: seconds until stored": burst.seconds,
        "burst CPU, µs per span": burst.cpu_us_per_span(),
        "steady CPU, µs per span": steady.cpu_us_per_span(),
        "steady: seconds until stored": steady.seconds,
        "steady: peak RSS, MB": steady.peak_total_rss / _MB,
        "requests sent again (refused, or connection closed)": burst.resent + steady.resent,
    }


def ratio_table(ours: dict[str, float], peer: dict[str, float], peer_label: str) -> list[str]:
    """Markdown rows: each figure of both and the ratio pathgrade / peer."""
    lines = [f"| whole system | pathgrade | {peer_label} | pathgrade / {peer_label} |"]
    lines.append("|---|---|---|---|")
    for name, value in ours.items():
        other = peer[name]
        ratio = f"{value / other:.3f}" if other else "-"
        lines.append(f"| {name} | {value:,.1f} | {other:,.1f} | {ratio} |")
    return lines


def target_lines(figures: dict[str, float]) -> list[str]:
    """Issue 46's targets against pathgrade's figures: the figure, the bound, holds or not
    (a target whose figure is not measured is left out)."""
    lines = []
    for name, (bound, strict) in TARGETS.items():
        if name in figures:
            value = figures[name]
            holds = value < bound if strict else value <= bound
            lines.append(f"- {name}: {value:,.2f} (target {'<' if strict else '<='} {bound:g}): "
                         f"{'holds' if holds else 'does NOT hold'}")  # fmt: skip
    return lines


def pathgrade_figures(result: Result) -> dict[str, float]:
    """pathgrade's figures the targets name (the relative ones only with a large load)."""
    figures = whole(result)
    large = result.phases.get("large")
    if large is not None:
        reference = large.cpu_us_per_span()
        figures["burst CPU / large-load CPU"] = figures["burst CPU, µs per span"] / reference
        figures["steady CPU / large-load CPU"] = figures["steady CPU, µs per span"] / reference
    return figures


def report(results: list[Result], loads: dict[str, list[bytes]], args) -> None:
    ours, peer = results
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")  # fmt: skip
    for result in results:
        print(f"{result.label} {result.version}")
    for name, bodies in loads.items():
        print(f"{name}: {ingest.span_count(bodies)} spans in {ingest.trace_count(bodies)} traces"
              + (f", paced at {args.rate:g} spans/s" if name == "steady" else ""))  # fmt: skip
    for result in results:
        print("\n" + "\n".join(process_table(result)))
    print("\n" + "\n".join(ratio_table(whole(ours), whole(peer), peer.label)))
    if "large" in ours.phases:
        print(f"\npathgrade's large load: {ours.phases['large'].cpu_us_per_span():.1f} µs per span")
    print("\nissue 46's targets, pathgrade:\n" + "\n".join(target_lines(pathgrade_figures(ours))))
    for result in results:
        seen = sorted(set(result.outbound))
        print(f"{result.label}: connections off the loopback: {', '.join(seen) or 'none'}")


OPTIONS = (  # flag, type, default, help
    ("--spans", int, 20_000, "spans of the burst"),
    ("--rate", float, 500.0, "spans per second of the steady stream"),
    ("--seconds", float, 30.0, "length of the steady stream"),
    ("--settle", float, 10.0, "seconds idle after the warm-up and between loads"),
    ("--large-spans", int, 200_000, "pathgrade's large load, the targets' reference (0: none)"),
    ("--batch", int, 512, "spans per request"),
    ("--senders", int, 4, "sending threads, each on its keep-alive connection"),
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for flag, kind, default, text in OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=text)
    parser.add_argument(
        "--phoenix-python", metavar="PATH",
        help=f"the python of a venv with arize-phoenix (default: one built under {PEERS_DIR})",
    )  # fmt: skip
    args = parser.parse_args()
    python = phoenix_python(args.phoenix_python)
    print("preparing requests ...", flush=True)
    mean = sum(ingest.SPANS_PER_TRACE) / 2
    loads = {
        "warm-up": ingest.realistic_bodies(round(ingest.WARM_UP_TRACES * mean), args.batch, seed=7),
        "burst": ingest.realistic_bodies(args.spans, args.batch, seed=5),
        "steady": ingest.realistic_bodies(round(args.rate * args.seconds), args.batch, seed=6),
    }
    large = (
        ingest.realistic_bodies(args.large_spans, args.batch, seed=8) if args.large_spans else []
    )
    results = []
    for make in (make_pathgrade, make_phoenix(python)):
        work_dir = Path(tempfile.mkdtemp(prefix="pathgrade-peers-"))
        try:
            system = make(work_dir)
            print(f"{system.label}: starting ...", flush=True)
            system.start()
            chosen = loads | ({"large": large} if large and system.label == "pathgrade" else {})
            results.append(run_system(system, chosen, args))
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
    report(results, loads, args)


def make_pathgrade(work_dir: Path) -> Pathgrade:
    return Pathgrade(work_dir, free_port())


def make_phoenix(python: str) -> Callable[[Path], Phoenix]:
    return lambda work_dir: Phoenix(python, work_dir, free_port())


if __name__ == "__main__":
    main()
