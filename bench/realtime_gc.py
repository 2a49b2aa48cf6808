"""What full garbage collections cost the realtime plane's work, in-process, in one run.

After one warm-up pass, decodes, assembles, evaluates and samples the demo traffic of
bench/ingest.py in alternating passes: with CPython's allocation-driven collections (the
baseline) and with full collections on pathgrade's timer (`pathgrade/stack/gc_schedule.py`).
Prints µs per span and the generation-2 pauses of each pass, and the ratio timer /
baseline.

    python bench/realtime_gc.py [--spans 100000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import request_bodies
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.otlp import decode_spans_message
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import TurnAssembler
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.realtime_plane.sampler import Sampler

from pathgrade.stack.gc_schedule import schedule_full_collections


def messages(spans: int) -> list[bytes]:
    """The demo requests as the realtime plane reads them: redacted, one message a trace."""
    redactor = Redactor(RedactionConfig(capture_tools=["*"]))
    out = []
    for body in request_bodies(spans, 512):
        request = ExportTraceServiceRequest.FromString(body)
        out.extend(message.value for message in group_by_trace(redactor.forward(request)).messages)
    return out


def evaluate_all(values: list[bytes]) -> tuple[int, float, list[float]]:
    """(spans, µs per span, generation-2 pauses in s) of one pass over `values`."""
    pauses: list[float] = []
    started: list[float] = []

    def record(phase: str, info: dict) -> None:
        if info["generation"] == 2:
            if phase == "start":
                started.append(time.perf_counter())
            else:
                pauses.append(time.perf_counter() - started.pop())

    gc.callbacks.append(record)
    try:
        assembler, evaluator = TurnAssembler(), TurnEvaluator(load_policy(None))
        sampler = Sampler(RealtimeConfig(bootstrap_servers="-").sampler)
        begun, spans = time.perf_counter(), 0
        for offset, value in enumerate(values):
            decoded = decode_spans_message(value, "t", 1)
            spans += len(decoded)
            assembler.add(0, offset, decoded, 0.0)
        for due in assembler.release_all():
            sampler.decide(evaluator.evaluate(due, 1), 1)
        elapsed = time.perf_counter() - begun
    finally:
        gc.callbacks.remove(record)
    return spans, elapsed / spans * 1e6, pauses


def report(label: str, spans: int, us_per_span: float, pauses: list[float]) -> None:
    worst = max(pauses, default=0.0)
    print(
        f"{label:<28} {us_per_span:7.1f} µs/span  {len(pauses):3d} full collections "
        f"(longest {worst * 1000:5.0f} ms, {sum(pauses):5.2f} s) over {spans} spans"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="default/timer pairs measured")
    args = parser.parse_args()
    values = messages(args.spans)
    evaluate_all(values)  # warm-up: the first pass fills caches either way
    totals = {"default": 0.0, "timer": 0.0}
    for _ in range(args.rounds):
        gc.collect()
        spans, us_per_span, pauses = evaluate_all(values)
        report("CPython default collections", spans, us_per_span, pauses)
        totals["default"] += us_per_span
        gc.collect()
        schedule = schedule_full_collections()
        try:
            spans, us_per_span, pauses = evaluate_all(values)
        finally:
            schedule.stop()
        report("full collections on a timer", spans, us_per_span, pauses)
        totals["timer"] += us_per_span
    print(f"ratio timer / default         {totals['timer'] / totals['default']:.2f}")


if __name__ == "__main__":
    main()
