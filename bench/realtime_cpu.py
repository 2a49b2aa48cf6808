"""CPU per span of the realtime plane's processing and output path, in one process.

Turns bench/ingest.py's requests (realistic mix by default) into what the collector
publishes (validate, redact with facts, group by trace: `pathgrade.spans` values with
tenant and receive-time headers), then hands them to a `RealtimePlane` as its Kafka poll
would (decode, assemble, evaluate every trace, sample, emit alerts, samples and turn
digests through the plane's producer to a bundled Tansu broker), polling the plane's
loop body with an injected clock so every trace is due on the next poll. No consumer
fetch is measured: what the plane does with what it read, and its outputs. CPU is the
process's (every thread: the producer's sender included), per span, best of `--rounds`;
in the same run the parse-only cost of the same values is the baseline of the ratio. The
process collects garbage on pathgrade's timer, as the realtime process does
(`pathgrade/stack/gc_schedule.py`; Python's default thresholds cost 10-25% more here).

`--compare-decode` runs the plane a second time in each round with the OTLP reader
(`content/_otlp_reader.c`) off, so messages are decoded by upb's parse and the Python walk
as without the extension, the two alternating which goes first; it prints both and their
ratio.

`--against PYTHON|COMMIT` (bench/ingest.py's `baseline_python`: a checkout's venv python,
or a commit checked out as a `git worktree` with a venv of its own) measures that
checkout's plane on the same mix as well: each round runs that checkout's copy of this
bench and this one, each for one plane run in a fresh subprocess (alternating which goes
first: A B B A ...; in one process, later rounds run on the heap and the tables the
earlier ones left), then prints the µs per span of both, best of `--rounds`, and their
ratio. It takes neither `--compare-decode` nor `--profile`.

    python bench/realtime_cpu.py [--spans 50000] [--mix realistic|demo] [--rounds 3]
                                 [--compare-decode] [--profile FILE.prof]
                                 [--against PYTHON|COMMIT]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import MIXES, baseline_python
from kafka import TopicPartition
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.collector.validate import validate_request
from pathgrade.content import otlp
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.pii import PiiScanner
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER

from pathgrade.stack.broker import LocalBroker, ensure_topics
from pathgrade.stack.gc_schedule import schedule_full_collections


@dataclass(frozen=True, slots=True)
class Message:
    """What the plane reads of a Kafka record."""

    value: bytes
    headers: list[tuple[str, bytes]]
    offset: int


def published(bodies: list[bytes]) -> list[Message]:
    """The `pathgrade.spans` records the collector publishes for these requests."""
    redactor = Redactor(RedactionConfig(), FactMaker(FactSecret(os.urandom(32)), PiiScanner()))
    out: list[Message] = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        validate_request(request)
        forwarded = redactor.forward(request)
        headers = [(TENANT_HEADER, b"default"), (RECEIVED_AT_HEADER, str(time.time_ns()).encode())]
        out += [Message(m.value, headers, len(out) + n) for n, m in enumerate(
            group_by_trace(forwarded).messages)]  # fmt: skip
    return out


class _Clock:
    """The plane's clock: a second past its quiet window on every reading after `add`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Records:
    """A consumer standing in for Kafka's: `poll` hands out the next chunk of records."""

    def __init__(self, messages: list[Message], per_poll: int) -> None:
        self.only = TopicPartition(SPANS_TOPIC, 0)
        self.chunks = [messages[i : i + per_poll] for i in range(0, len(messages), per_poll)]

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[Message]]:
        return {self.only: self.chunks.pop(0)} if self.chunks else {}

    def partition(self, number: int, topic: str | None = None) -> TopicPartition:
        return TopicPartition(topic or SPANS_TOPIC, number)

    def commit(self, offsets: Any) -> None:
        pass


def run_plane(bootstrap: str, messages: list[Message], profile: cProfile.Profile | None) -> float:
    """CPU seconds the plane spends on `messages` (every trace evaluated, outputs sent and
    flushed)."""
    config = RealtimeConfig(bootstrap_servers=bootstrap, turns_topic=None)
    clock = _Clock()
    plane = RealtimePlane(config, clock=clock)
    plane.start()  # the producer (and a consumer we do not use)
    plane._stop.set()
    assert plane._thread is not None
    plane._thread.join()
    assert plane.consumer is not None
    plane.consumer.close()
    plane.consumer = _Records(messages, 2000)  # type: ignore[assignment]
    plane.assigned = {0}
    started = time.process_time()
    if profile:
        profile.enable()
    while plane.consumer.chunks:  # type: ignore[attr-defined]
        plane.poll_once()
        clock.now += 10.0  # every trace of the poll is quiet on the next one
    plane.poll_once()
    assert plane.producer is not None
    plane.producer.flush()
    if profile:
        profile.disable()
    cpu = time.process_time() - started
    evaluated = plane.counters_.traces_evaluated
    print(f"  {evaluated} traces evaluated, {plane.counters_.alerts} alerts, "
          f"{plane.counters_.sampled} sampled", flush=True)  # fmt: skip
    plane.producer.close()
    plane.producer = None
    return cpu


def fresh_round(python: str, bench: Path, spans: int, mix: str) -> float:
    """µs of CPU per span of one plane run in a fresh process: `bench` (a checkout's copy
    of this bench) run by `python`, one round (its output shown indented)."""
    command = [python, str(bench), "--spans", str(spans), "--mix", mix, "--rounds", "1"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    print("".join(f"    {line}" for line in out.splitlines(keepends=True)), end="", flush=True)
    return float(out.split(f"{PLANE_LINE} ", 1)[1].split()[0])


NAME = Path(__file__).name
PLANE_LINE = "realtime plane   "
"""What starts the line with the plane's µs per span (parsed from an `--against` run)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--compare-decode",
        action="store_true",
        help="also run each round with the OTLP reader off (upb and the Python walk decode)",
    )
    parser.add_argument("--profile", metavar="FILE", help="cProfile the last round to FILE")
    parser.add_argument(
        "--against",
        metavar="PYTHON|COMMIT",
        help="also run that checkout's copy of this bench each round (a subprocess)",
    )
    args = parser.parse_args()
    if args.against and (args.compare_decode or args.profile):
        parser.error("--against runs both planes in subprocesses: no --compare-decode, --profile")
    against = baseline_python(args.against) if args.against else None
    fresh = (  # with --against: each variant's python and bench, for `fresh_round`
        {
            "against": (against, Path(against).parent.parent.parent / "bench" / NAME),
            "reader": (sys.executable, Path(__file__)),
        }  # (venv/bin/python: its checkout is three levels up)
        if against
        else {}
    )
    if otlp.read_traces is None:
        print("the OTLP reader (pathgrade.content._otlp_reader) is not built: upb decodes")
        if args.compare_decode:
            parser.error("--compare-decode needs the OTLP reader")
    # how each variant decodes: the OTLP reader as installed, or none (upb and Python)
    variants = {"reader": otlp.read_traces, "python": None}
    if not args.compare_decode:
        del variants["python"]

    schedule_full_collections()
    bodies = MIXES[args.mix](args.spans, 512)
    messages = published(bodies)
    spans = sum(
        len(ss.spans)
        for m in messages
        for rs in TracesData.FromString(m.value).resource_spans
        for ss in rs.scope_spans
    )
    started = time.process_time()
    for m in messages:
        TracesData.FromString(m.value)
    parse_us = (time.process_time() - started) / spans * 1e6
    broker = LocalBroker()
    broker.start()
    try:
        ensure_topics(broker.bootstrap)
        names = (["against"] if against else []) + list(variants)
        costs: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names[:: 1 if round_ % 2 == 0 else -1]:
                if against:
                    python, bench = fresh[name]
                    print(f"  round {round_ + 1}, {name} ({python}):", flush=True)
                    costs[name].append(fresh_round(python, bench, args.spans, args.mix))
                    continue
                last = round_ == args.rounds - 1 and name == "reader"
                profile = cProfile.Profile() if args.profile and last else None
                print(f"  round {round_ + 1}, {name}:", flush=True)
                otlp.read_traces = variants[name]
                try:
                    costs[name].append(run_plane(broker.bootstrap, messages, profile) / spans * 1e6)
                finally:
                    otlp.read_traces = variants["reader"]
                if profile:
                    profile.dump_stats(args.profile)
    finally:
        broker.stop()
    best = {name: min(c) for name, c in costs.items()}
    print(f"{spans} spans in {len(messages)} messages ({args.mix} mix)")
    print(f"parse only        {parse_us:7.2f} µs CPU per span")
    labels = (
        ("reader", PLANE_LINE),
        ("python", "  Python decode  "),
        ("against", "against          "),
    )
    for name, label in labels:
        if name in costs:
            print(f"{label} {best[name]:7.2f} µs CPU per span (best of "
                  f"{', '.join(f'{c:.1f}' for c in costs[name])})")  # fmt: skip
    print(f"ratio to parse    {best['reader'] / parse_us:7.1f}")
    if "python" in best:
        print(f"reader / Python   {best['reader'] / best['python']:7.2f}")
    if "against" in best:
        print(f"this / against    {best['reader'] / best['against']:7.2f}")


if __name__ == "__main__":
    main()
