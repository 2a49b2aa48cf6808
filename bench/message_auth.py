"""What signing and checking the stack's Kafka messages costs, per message and per span,
against decoding the same messages (what every consumer of `pathgrade.spans` does anyway).

The messages are the collector's: bench/ingest.py's realistic requests (or its demo deck,
`--mix demo`), redacted on default settings and grouped by trace as the collector
publishes them (`Redactor.forward`, `group_by_trace`). In alternating rounds in one run it
times, in this process: the MAC the collector adds when it sends a message
(`MessageKey.signed`), the check each consumer group makes when it reads one
(`MessageKey.authentic`; the store writer and the realtime plane each check every span
message), and the baseline, the canonical decode of the message (`decode_spans_message`).
It prints CPU µs per message and per span of each, the best of the rounds, and the ratio
of one send's signing plus two groups' checks over one decode.

    python bench/message_auth.py [--spans 50000] [--batch 512] [--rounds 5] [--mix realistic|demo]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import realistic_bodies, request_bodies, span_count
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.otlp import decode_spans_message
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER
from pathgrade.transport.message_auth import MessageKey

HEADERS = [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"1765000000000000000")]


def cpu_us(work: Callable[[], Any]) -> float:
    """CPU µs `work` took."""
    started = time.process_time()
    work()
    return (time.process_time() - started) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mix", choices=("realistic", "demo"), default="realistic")
    args = parser.parse_args()
    if args.mix == "realistic":
        bodies = realistic_bodies(args.spans, args.batch)
    else:
        bodies = request_bodies(args.spans, args.batch, "genai", seed=3)
    spans = span_count(bodies)
    redactor = Redactor(RedactionConfig())
    forwarded = [redactor.forward(ExportTraceServiceRequest.FromString(body)) for body in bodies]
    messages = [(m.key, m.value) for f in forwarded for m in group_by_trace(f).messages]
    key = MessageKey.generate()
    signed = [key.signed(SPANS_TOPIC, k, v, HEADERS) for k, v in messages]
    rounds: dict[str, list[float]] = {"sign": [], "check": [], "decode": []}
    for _ in range(args.rounds):
        rounds["sign"].append(cpu_us(lambda: [key.signed(SPANS_TOPIC, k, v, HEADERS)
                                              for k, v in messages]))  # fmt: skip
        rounds["check"].append(cpu_us(lambda: [
            key.authentic(SPANS_TOPIC, k, v, h) for (k, v), h in zip(messages, signed, strict=True)
        ]))  # fmt: skip
        rounds["decode"].append(cpu_us(lambda: [decode_spans_message(v, "acme", 1)
                                                for _, v in messages]))  # fmt: skip
    size = sum(len(v) for _, v in messages) / len(messages)
    print(f"{len(messages):,} messages of {spans:,} spans ({args.mix} mix), "
          f"{size:,.0f} bytes a message on average; best of {args.rounds} rounds")  # fmt: skip
    best = {name: min(times) for name, times in rounds.items()}
    for name, total in best.items():
        print(f"{name:<7} {total / len(messages):7.2f} µs/message  {total / spans:6.3f} µs/span")
    mac = best["sign"] + 2 * best["check"]
    print(f"sign + 2 checks over one decode: {mac / best['decode']:.3f}")


if __name__ == "__main__":
    main()
