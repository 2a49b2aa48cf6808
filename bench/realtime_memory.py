"""Memory the realtime plane keeps per span for late spans: tracemalloc over the traces
its assembler remembers once graded.

Publishes `--spans` spans of bench/ingest.py's mix as the collector would
(bench/realtime_cpu.py's `published`), hands them to a `RealtimePlane` as its Kafka poll
would, with its injected clock so every trace is evaluated (no broker: alerts, samples
and turn digests off), then reads what forgetting the assembler's remembered traces frees
(tracemalloc runs from before the messages are built, so messages the plane keeps count),
per span read. `--against PYTHON|COMMIT` (bench/ingest.py's `baseline_python`) runs the
same in that checkout first and prints the ratio this / against.

    python bench/realtime_memory.py [--spans 20000] [--mix realistic|demo]
                                    [--against PYTHON|COMMIT]

Figures: docs/scale.md ("The realtime plane's remembered traces").
"""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import MIXES, baseline_python
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane
from realtime_cpu import _Clock, _Records, published

RESULT = "bytes per remembered span"


def remembered_bytes(spans: int, mix: str) -> tuple[float, int, int]:
    """Bytes per span of the traces remembered after `spans` spans of `mix`, the spans
    read and the traces remembered."""
    tracemalloc.start()
    messages = published(MIXES[mix](spans, 512))
    config = RealtimeConfig(
        bootstrap_servers="localhost:9", alerts_topic=None, sampled_topic=None, turns_topic=None
    )
    clock = _Clock()
    plane = RealtimePlane(config, clock=clock)
    plane.consumer = _Records(messages, 2000)  # type: ignore[assignment]
    plane.assigned = {0}
    while plane.consumer.chunks:  # type: ignore[attr-defined]
        plane.poll_once()
        clock.now += 10.0  # every trace of the poll is quiet on the next one
    plane.poll_once()
    del messages
    gc.collect()
    recent = plane.assembler._recent
    traces = len(recent)
    before = tracemalloc.get_traced_memory()[0]
    recent.clear()
    gc.collect()
    freed = before - tracemalloc.get_traced_memory()[0]
    read = plane.counters_.spans
    return freed / read, read, traces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--mix", choices=sorted(MIXES), default="realistic")
    parser.add_argument("--against", metavar="PYTHON|COMMIT")
    args = parser.parse_args()
    against = None
    if args.against:
        python = baseline_python(args.against)
        command = [python, __file__, "--spans", str(args.spans), "--mix", args.mix]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        print(f"against ({python}):\n{out}", end="", flush=True)
        against = float(out.rsplit(f"{RESULT} ", 1)[1].split()[0])
    per_span, read, traces = remembered_bytes(args.spans, args.mix)
    if against is not None:
        print(f"this ({sys.executable}):")
    print(f"  {read} spans read, {traces} traces remembered")
    print(f"  {RESULT} {per_span:.0f}")
    if against is not None:
        print(f"this / against: {per_span / against:.2f}")


if __name__ == "__main__":
    main()
