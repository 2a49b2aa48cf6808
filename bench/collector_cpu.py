"""CPU the live collector process spends per span, against another checkout in the same run.

Each round starts a fresh bundled broker (Tansu) and a collector child process of each
variant (its checkout's python) with the embedded stack's settings (durable log and facts
on, unless `--memory-only`), posts bench/ingest.py's request bodies to it over keep-alive
OTLP/HTTP from a few threads of this process, and waits until the collector has every
span in Kafka (its log sent on). The figure is the collector process's CPU seconds (all
its threads, from the first request to the last span sent on) per span; the variants
alternate round by round, and the last line is the ratio of the medians this / against.
`--against-no-facts` compares this checkout's collector with facts (the default) against
the same collector with facts off (`CollectorConfig.facts`): the live process's share of
facts, beside the stage figure of bench/ingest_stages.py (which leaves out HTTP, the Kafka
client and the durable log).

`--profile FILE` (one variant, this checkout) cProfiles every thread of the collector and
writes the merged statistics to FILE (`python -m pstats FILE`); profiling inflates the
figures, so read its shares, not its times.

    python bench/collector_cpu.py [--spans 60000] [--mix realistic|demo] [--batch 512]
                                  [--senders 4] [--rounds 3] [--against PYTHON]
                                  [--against-no-facts] [--memory-only] [--profile FILE]
                                  [--capture-tools NAMES]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD_FLAG = "--serve-collector"


# ------------------------------------------------------------------ the collector child


def serve(
    bootstrap: str, spill_dir: str, durable: bool, facts: bool, profile: str | None,
    capture_tools: list[str],
) -> None:  # fmt: skip
    """Child: run a collector, answer the parent's commands on stdin ("cpu": this
    process's CPU seconds; "sent N": wait until N spans are accepted and the log is sent
    on, then the CPU seconds; "stop")."""
    profilers = _profile_threads() if profile else []
    from pathgrade.collector.config import CollectorConfig
    from pathgrade.collector.redact import RedactionConfig
    from pathgrade.collector.service import Collector

    config = CollectorConfig(
        kafka_bootstrap=bootstrap, spill_dir=Path(spill_dir), grpc_port=0, http_port=0,
        durable_log=durable, facts=facts, redaction=RedactionConfig(capture_tools=capture_tools),
    )  # fmt: skip
    collector = Collector(config)
    collector.start()
    print(json.dumps({"http_port": collector.http_port}), flush=True)
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "sent":
            _wait_until_sent(collector, int(rest[0]))
        if command == "stop":
            break
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime, "sys_s": usage.ru_stime}),
              flush=True)  # fmt: skip
    collector.stop()
    if profile:
        _write_profile(profilers, profile)


def _wait_until_sent(collector: object, spans: int) -> None:
    counters = collector.counters  # type: ignore[attr-defined]
    while counters()["accepted_spans"] < spans or counters()["spill_bytes"] > 0:
        time.sleep(0.05)


def _profile_threads() -> list:
    """A cProfile for every thread started from now on (cProfile sees one thread)."""
    import cProfile
    import threading

    profilers: list = []
    run = threading.Thread.run

    def profiled_run(self: threading.Thread) -> None:
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.runcall(run, self)

    threading.Thread.run = profiled_run  # type: ignore[method-assign]
    return profilers


def _write_profile(profilers: list, path: str) -> None:
    import pstats

    for profiler in profilers:
        profiler.disable()
    stats = pstats.Stats(profilers[0])
    for profiler in profilers[1:]:
        stats.add(profiler)
    stats.dump_stats(path)


# ------------------------------------------------------------------ the parent


class Variant(NamedTuple):
    """A collector to measure: its checkout's python, and whether it records facts."""

    python: str
    facts: bool = True


def run_once(
    variant: Variant, bodies: list[bytes], spans: int, args: argparse.Namespace
) -> tuple[float, float]:
    """CPU µs per span (all, and the system's part) of one collector of `variant`, on a
    fresh broker."""
    from ingest import send_traces

    from pathgrade.stack.broker import LocalBroker, ensure_topics

    broker = LocalBroker()
    broker.start()
    try:
        ensure_topics(broker.bootstrap)
        with tempfile.TemporaryDirectory(prefix="pathgrade-collector-cpu-") as spill_dir:
            command = [variant.python, __file__, CHILD_FLAG, broker.bootstrap, spill_dir,
                       "memory" if args.memory_only else "durable",
                       "facts" if variant.facts else "no-facts", args.profile or "",
                       args.capture_tools]  # fmt: skip
            child = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                cwd=tempfile.gettempdir(),
            )  # fmt: skip
            assert child.stdin is not None and child.stdout is not None
            commands, answers = child.stdin, child.stdout

            def ask(command: str) -> dict:
                commands.write(command + "\n")
                commands.flush()
                return json.loads(answers.readline()) if command != "stop" else {}

            try:
                port = json.loads(answers.readline())["http_port"]
                before = ask("cpu")
                send_traces(port, bodies, args.senders)
                after = ask(f"sent {spans}")
                ask("stop")
                child.wait(timeout=120)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    finally:
        broker.stop()
    return tuple((after[key] - before[key]) / spans * 1e6 for key in ("cpu_s", "sys_s"))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=60_000)
    parser.add_argument("--mix", choices=("realistic", "demo"), default="realistic")
    parser.add_argument("--batch", type=int, default=512, help="spans per request")
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each variant")
    parser.add_argument("--against", metavar="PYTHON", help="the other checkout's python")
    parser.add_argument(
        "--against-no-facts", action="store_true", help="baseline: this collector, facts off"
    )
    parser.add_argument("--memory-only", action="store_true", help="durable log off")
    parser.add_argument(
        "--capture-tools", default="",
        help="tools whose content the collector keeps, comma-separated (`*`: all, as "
        "bench/realtime.py's stack runs; default none: the fact kernel writes whole spans)",
    )  # fmt: skip
    parser.add_argument("--profile", metavar="FILE", help="cProfile this checkout's collector")
    args = parser.parse_args()

    from ingest import MIXES, span_count

    bodies = MIXES[args.mix](args.spans, args.batch)
    spans = span_count(bodies)
    if args.against and args.against_no_facts:
        parser.error("--against and --against-no-facts: one baseline at a time")
    variants = {"this": Variant(sys.executable)}
    if args.against_no_facts and not args.profile:
        variants = {"no facts": Variant(sys.executable, facts=False), **variants}
    elif args.against and not args.profile:
        variants = {"against": Variant(args.against), **variants}
    figures: dict[str, list[float]] = {label: [] for label in variants}
    for round_ in range(1 if args.profile else args.rounds):
        for label, variant in variants.items():
            cpu_us, system_us = run_once(variant, bodies, spans, args)
            figures[label].append(cpu_us)
            print(f"round {round_ + 1} {label:<8} {cpu_us:6.1f} µs CPU per span "
                  f"({system_us:.1f} of it system)", flush=True)  # fmt: skip
    print(f"\n{spans} spans in {len(bodies)} requests ({args.mix} mix, "
          f"{'memory only' if args.memory_only else 'durable log'})")  # fmt: skip
    for label, values in figures.items():
        print(f"collector {label:<8} median {statistics.median(values):6.1f} µs CPU per span "
              f"(runs: {', '.join(f'{v:.1f}' for v in values)})")  # fmt: skip
    if len(figures) == 2:
        baseline = next(iter(figures))
        ratio = statistics.median(figures["this"]) / statistics.median(figures[baseline])
        print(f"this / {baseline}: {ratio:.3f}")
    if args.profile:
        print(f"profile: python -m pstats {args.profile}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD_FLAG:
        bootstrap, spill_dir, mode, facts, profile, capture = sys.argv[2:8]
        serve(bootstrap, spill_dir, mode == "durable", facts == "facts", profile or None,
              [name for name in capture.split(",") if name])  # fmt: skip
    else:
        main()
