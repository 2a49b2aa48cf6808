"""Memory of the embedded stack, per process: idle, and at its peak through a burst.

Starts `pathgrade up` as a user would (bundled Tansu broker, chDB store, a temporary data
directory, no demo traffic), waits `--settle` seconds after "pathgrade is up", reads the
memory of every process of the stack (the process tree under `pathgrade up`, roles from
its `stack.json`), then sends a burst of `--spans` spans of bench/ingest.py's realistic
mix over OTLP/HTTP (its traffic generator and senders) and samples every process every
0.2 s until every span is stored and every trace evaluated (the stack's status counters,
then `SELECT count()`, as bench/ingest.py waits), and once more `--settle` seconds after.

Memory is resident set size (RSS, /proc/PID/status: VmRSS, with its anonymous part
RssAnon; the rest are mapped files, chDB's 555 MB library mostly) and proportional set
size (PSS, /proc/PID/smaps_rollup, where this user may read it: pages shared between
processes counted once over them; "-" where it may not). The table prints per process
idle RSS / PSS / anonymous, peak RSS and PSS through the burst, RSS after it, and the
whole stack's sums (the peak of the sum, sampled together, not the sum of the peaks).

Against another checkout (`--against PYTHON|COMMIT`, as bench/ingest.py takes it: the
python of that checkout's venv, or a commit checked out as a `git worktree` with a venv of
its own): the same burst through
that checkout's stack and this one's, alternately for `--rounds` rounds, and the ratios
this / against of the whole stack's idle and peak.

    python bench/memory.py [--spans 20000] [--settle 10] [--senders 4]
                           [--against PYTHON|COMMIT] [--rounds 1] [--up-arg ARG ...]

Figures: docs/scale.md ("Memory").
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import (
    TRACES_PATH,
    WAIT_LIMIT_S,
    Variant,
    baseline_python,
    process_tree,
    realistic_bodies,
    realtime_evaluated,
    role_of,
    send_all,
    span_count,
    stack_snapshot,
    start_stack,
    stored_all,
    trace_count,
)
from pathgrade.batch_plane.store.remote import RemoteStore

from pathgrade.stack.broker import free_port

SAMPLE_EVERY_S = 0.2
_KB = 1024
_MB = 1024 * 1024
ORDER = ("store owner", "collector", "realtime", "broker", "other")  # the table's rows


@dataclass(frozen=True)
class Memory:
    """One process's memory at one moment, in bytes (pss None where unreadable)."""

    rss: int
    anon: int
    pss: int | None


def read_memory(pid: int) -> Memory | None:
    """Memory of process `pid` now; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = {
        line.split(":", 1)[0]: int(line.split()[1]) * _KB
        for line in status.splitlines()
        if line.startswith(("VmRSS:", "RssAnon:"))
    }
    pss = None
    with suppress(OSError, ValueError, IndexError):
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        lines = rollup.splitlines()
        pss = next(int(line.split()[1]) * _KB for line in lines if line.startswith("Pss:"))
    return Memory(fields.get("VmRSS", 0), fields.get("RssAnon", 0), pss)


def stack_memory(root: int, data_dir: Path) -> dict[str, Memory]:
    """Memory of every process of the stack under `root`, by row name ("role [pid]")."""
    out = {}
    for pid, name in process_tree(root, data_dir).items():
        memory = read_memory(pid)
        if memory is not None:
            out[f"{role_of(name)}: {name} [{pid}]"] = memory
    return out


@dataclass
class Sampler:
    """Samples the processes `read` returns (row name -> memory: `stack_memory` of a
    stack) every `every_s` in a thread until `stop()`, keeping each process's peak RSS and
    PSS and the peak of the whole stack's sums."""

    read: Callable[[], dict[str, Memory]]
    every_s: float = SAMPLE_EVERY_S
    peak_rss: dict[str, int] = field(default_factory=dict)
    peak_pss: dict[str, int] = field(default_factory=dict)
    peak_total_rss: int = 0
    peak_total_pss: int = 0
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.read()
            for name, memory in now.items():
                self.peak_rss[name] = max(self.peak_rss.get(name, 0), memory.rss)
                if memory.pss is not None:
                    self.peak_pss[name] = max(self.peak_pss.get(name, 0), memory.pss)
            self.peak_total_rss = max(self.peak_total_rss, sum(m.rss for m in now.values()))
            self.peak_total_pss = max(self.peak_total_pss, sum(m.pss or 0 for m in now.values()))
            self.samples += 1
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


@dataclass
class MemoryRun:
    """What one stack of one variant held idle, at its peak and after the burst."""

    variant: Variant
    idle: dict[str, Memory]
    after: dict[str, Memory]
    sampler: Sampler
    caught_up_s: float


def run_once(
    variant: Variant, bodies: list[bytes], spans: int, traces: int, args: argparse.Namespace
) -> MemoryRun:
    """Start a fresh stack of `variant`, read it idle, send the burst, sample it until
    every span is stored and every trace evaluated, and read it once more after."""
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-memory-"))
    http_port = free_port()
    stack = start_stack(variant, data_dir, http_port, nice=19)
    try:
        state = json.loads((data_dir / "stack.json").read_text())
        store = RemoteStore(state["query_url"], state.get("token", ""))
        time.sleep(args.settle)
        idle = stack_memory(stack.pid, data_dir)
        sampler = Sampler(partial(stack_memory, stack.pid, data_dir))
        sampler.start()
        started = time.perf_counter()
        send_all(http_port, [(TRACES_PATH, body) for body in bodies], args.senders)
        while True:
            if time.perf_counter() - started > WAIT_LIMIT_S:
                raise SystemExit(f"{variant.label}: the stack did not catch up in time")
            snapshot = stack_snapshot(data_dir)
            counted = realtime_evaluated(snapshot)
            if counted is not None and counted[0] >= traces and stored_all(store, spans, snapshot):
                break
            time.sleep(0.1)
        caught_up = time.perf_counter() - started
        sampler.stop()
        time.sleep(args.settle)
        after = stack_memory(stack.pid, data_dir)
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        shutil.rmtree(data_dir, ignore_errors=True)
    return MemoryRun(variant, idle, after, sampler, caught_up)


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / _MB:.0f}"


def report(run: MemoryRun) -> None:
    """One run's per-process table and its sums."""
    print(f"\n{run.variant.label} ({run.variant.python}): caught up {run.caught_up_s:.1f} s "
          f"after the burst started, {run.sampler.samples} samples")  # fmt: skip
    head = ("idle RSS", "idle PSS", "idle anon", "peak RSS", "peak PSS", "after RSS")
    print(f"  {'MB':<46}" + "".join(f"{h:>10}" for h in head))
    names = sorted(
        {*run.idle, *run.sampler.peak_rss, *run.after},
        key=lambda n: (ORDER.index(n.split(":", 1)[0]), n),
    )
    for name in names:
        idle, after = run.idle.get(name), run.after.get(name)
        values = (
            idle and idle.rss, idle and idle.pss, idle and idle.anon,
            run.sampler.peak_rss.get(name), run.sampler.peak_pss.get(name), after and after.rss,
        )  # fmt: skip
        print(f"  {name[:46]:<46}" + "".join(f"{_mb(v):>10}" for v in values))
    totals = (
        sum(m.rss for m in run.idle.values()), sum(m.pss or 0 for m in run.idle.values()),
        sum(m.anon for m in run.idle.values()), run.sampler.peak_total_rss,
        run.sampler.peak_total_pss, sum(m.rss for m in run.after.values()),
    )  # fmt: skip
    print(f"  {'whole stack':<46}" + "".join(f"{_mb(v):>10}" for v in totals))


def idle_total(run: MemoryRun) -> int:
    return sum(m.rss for m in run.idle.values())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=20_000, help="spans of the burst")
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument(
        "--settle", type=float, default=10.0,
        help="seconds after `pathgrade is up` (and after the burst) before reading idle",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="PYTHON|COMMIT",
        help="also run the stack of the checkout this python belongs to, alternately",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="runs of each variant")
    parser.add_argument(
        "--up-arg", action="append", default=[],
        help="an extra `pathgrade up` argument for this checkout's stack (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    variants = [Variant("this", sys.executable, tuple(args.up_arg))]
    if args.against:
        variants.insert(0, Variant("against", baseline_python(args.against)))
    bodies = realistic_bodies(args.spans, args.batch)
    spans, traces = span_count(bodies), trace_count(bodies)
    runs = []
    for round_ in range(args.rounds):
        for variant in variants:
            print(f"round {round_ + 1}: {variant.label}: a burst of {spans} spans in "
                  f"{traces} traces ...", flush=True)  # fmt: skip
            runs.append(run_once(variant, bodies, spans, traces, args))
    for run in runs:
        report(run)
    if args.against:
        mean = {
            label: [
                sum(f(r) for r in runs if r.variant.label == label)
                / sum(r.variant.label == label for r in runs)
                for f in (idle_total, lambda r: r.sampler.peak_total_rss)
            ]
            for label in ("against", "this")
        }
        idle_ratio = mean["this"][0] / mean["against"][0]
        peak_ratio = mean["this"][1] / mean["against"][1]
        print(f"\nwhole stack RSS this / against: idle {idle_ratio:.2f}, peak {peak_ratio:.2f}")


if __name__ == "__main__":
    main()
