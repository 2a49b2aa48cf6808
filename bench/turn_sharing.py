"""CPU per conversation turn of sharing turn digests (`pathgrade.turns`), against the
evaluation the realtime plane does for that turn anyway, in one run.

Starts the bundled Tansu broker with pathgrade's topics, decodes demo traffic, then
alternates rounds over the same turns: the baseline evaluates each turn (a
`TurnEvaluator`, as the plane does); the shared rounds evaluate it too, publish its
digest with the plane's producer settings in batches (`TurnBatcher`; the plane publishes
every 0.2 s, so a batch holds a fifth of a consumer's turns per second) and read every
digest back through a `TurnFeed` of another consumer into a second evaluator's cache, as
the group's other consumers do. Prints CPU µs per turn of each (Kafka client threads
counted) and the ratios, for batches of one turn and of `--batch` turns.

    python bench/turn_sharing.py [--turns 2000] [--rounds 3] [--batch 50]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content.otlp import decode_spans_message
from pathgrade.detectors import default_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.counters import RealtimeCounters
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.realtime_plane.turns import TurnBatcher, TurnFeed
from pathgrade.schemas.model import Trace
from pathgrade.schemas.topics import TURNS_TOPIC
from pathgrade.transport.kafka_settings import kafka_client_settings

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker, ensure_topics


class _Keep(InMemorySpanExporter):
    def shutdown(self) -> None:  # keep the spans after the demo shuts its provider down
        pass


def demo_turns(count: int) -> list[DueTurn]:
    exporter = _Keep()
    send_demo_traces(exporter, traces=count, seed=3)
    spans = decode_spans_message(
        encode_spans(exporter.get_finished_spans()).SerializeToString(), "bench", 1
    )
    by_trace = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    return [DueTurn(Trace("bench", t, s), "quiet", False) for t, s in by_trace.items()]


def baseline_round(turns: list[DueTurn]) -> float:
    evaluator = TurnEvaluator(default_policy())
    started = time.process_time()
    for due in turns:
        evaluator.evaluate(due, time.time_ns())
    return time.process_time() - started


def shared_round(
    turns: list[DueTurn], producer: KafkaProducer, feed: TurnFeed, batch: int
) -> float:
    evaluator, other = TurnEvaluator(default_policy()), TurnEvaluator(default_policy())
    batcher = TurnBatcher("publisher")
    started = time.process_time()
    published = 0
    for count, due in enumerate(turns, 1):
        digest = evaluator.evaluate(due, time.time_ns()).digest
        if digest is not None and batcher.add(digest):
            published += 1
        if count % batch == 0 or count == len(turns):
            for message in batcher.take():
                producer.send(TURNS_TOPIC, **message)
    producer.flush()
    received, deadline = 0, time.monotonic() + 60
    while received < published and time.monotonic() < deadline:
        digests = feed.poll(RealtimeCounters())
        for digest in digests:
            other.remember(digest)
        received += len(digests)
        if not digests:
            time.sleep(0.01)  # the plane reads every 0.2 s; waiting here costs no CPU
    if received < published:
        raise SystemExit(f"read back {received} of {published} digests within 60 s")
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=50, help="turns per published batch")
    args = parser.parse_args()
    turns = demo_turns(args.turns)
    broker = LocalBroker()
    broker.start()
    try:
        ensure_topics(broker.bootstrap)
        producer = KafkaProducer(
            **kafka_client_settings(broker.bootstrap), linger_ms=100, acks=1
        )  # the plane's settings for what is not on the webhook's path
        feed = TurnFeed(broker.bootstrap, TURNS_TOPIC, "reader", lookback_s=60)
        feed.start()
        baseline, single, batched = [], [], []
        for _ in range(args.rounds):
            baseline.append(baseline_round(turns) / len(turns) * 1e6)
            single.append(shared_round(turns, producer, feed, 1) / len(turns) * 1e6)
            batched.append(shared_round(turns, producer, feed, args.batch) / len(turns) * 1e6)
        feed.close()
        producer.close()
    finally:
        broker.stop()
    base = min(baseline)
    print(f"turns per round                         {len(turns)}")
    print(f"evaluate (baseline)                     {base:8.1f} µs CPU per turn")
    for label, costs in ((1, single), (args.batch, batched)):
        cost = min(costs)
        print(
            f"+ share + read back, {label:3d} turns/message {cost:8.1f} µs CPU per turn"
            f"   ratio to baseline {cost / base:.2f}"
        )


if __name__ == "__main__":
    main()
