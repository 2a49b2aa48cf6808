"""Store-writer CPU per span at a steady rate, by batching settings, in one run.

A child process produces `pathgrade.spans` values (bench/store_insert.py's: the realistic
mix forwarded as the collector does on default settings, cycled to `--seconds` of traffic)
at `--rate` spans/s to a topic of its own on a bundled Tansu broker; this process runs a
`StoreWriter` on it into a fresh embedded store (chDB in this process, so its CPU is
counted) until the writer has inserted every span. CPU is this process's (all threads:
the writer, kafka-python's, chDB's) per span inserted, from the first value produced to
the last span inserted; the batches the writer wrote and the path they took are printed
too. Full garbage collections run on the store owner's timer, as in the stack
(`pathgrade.stack.gc_schedule`). Variants alternate for `--rounds` rounds; the ratio is
the last variant's mean CPU per span over the first's. The default variants compare the
store writer's default `sql_batch_age_s` (5 s: a batch on its way to the SQL path grows
until then) with 2 s (`max_batch_age_s`: every batch written at 2 s, as before that
setting).

    python bench/store_writer_rate.py [--rate 6000] [--seconds 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from pathgrade.batch_plane.store.client import embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.otlp_insert import pending_message
from pathgrade.batch_plane.store.writer import StoreWriter
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, TENANT_HEADER
from store_insert import forwarded_values

from pathgrade.stack.broker import LocalBroker
from pathgrade.stack.gc_schedule import schedule_full_collections

VARIANTS: dict[str, dict[str, float]] = {
    "2 s batches": {"sql_batch_age_s": 2.0},
    "default": {},
}


def produce(bootstrap: str, topic: str, values: list[bytes], spans: list[int], rate: float) -> None:
    """Send `values` (of `spans` spans each) to `topic` at `rate` spans/s, paced."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    started = time.monotonic()
    sent = 0
    for value, count in zip(values, spans, strict=True):
        wait = started + sent / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        headers = [(TENANT_HEADER, b"bench"), (RECEIVED_AT_HEADER, str(time.time_ns()).encode())]
        producer.send(topic, value, headers=headers)
        sent += count
    producer.flush()
    producer.close()


def run_once(
    bootstrap: str, topic: str, values: list[bytes], spans: list[int], rate: float,
    options: dict[str, float],
) -> tuple[float, StoreWriter]:  # fmt: skip
    """CPU seconds of this process from the first value produced to the last span inserted."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    with tempfile.TemporaryDirectory(prefix="pathgrade-writer-rate-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        config = StoreWriterConfig(
            bootstrap_servers=bootstrap, topic=topic, group_id=f"{topic}.writer", **options
        )
        writer = StoreWriter(config, store)
        while not writer.consumer.assignment():  # joined before the clock starts
            writer.poll_once()
        producer = multiprocessing.get_context("spawn").Process(
            target=produce, args=(bootstrap, topic, values, spans, rate)
        )
        started = time.process_time()
        producer.start()
        while writer.stats.spans + writer.stats.rejected_spans < sum(spans):
            writer.poll_once()
        cpu = time.process_time() - started
        producer.join()
        writer.close()
        store.close()
    return cpu, writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=6000, help="spans/s produced")
    parser.add_argument("--seconds", type=float, default=20, help="of traffic per run")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    schedule_full_collections()  # as the store owner does (pathgrade.stack.children)
    template = forwarded_values(20_000, "realistic")
    counts = [pending_message(v, "", 0).spans for v in template]
    values, spans = [], []
    while sum(spans) < args.rate * args.seconds:
        values.extend(template)
        spans.extend(counts)
    broker = LocalBroker()
    broker.start()
    results: dict[str, list[float]] = {label: [] for label in VARIANTS}
    try:
        for round_ in range(args.rounds):
            for number, (label, options) in enumerate(VARIANTS.items()):
                topic = f"bench.writer-rate.{round_}.{number}"
                cpu, writer = run_once(broker.bootstrap, topic, values, spans, args.rate, options)
                stats = writer.stats
                per_span = cpu / sum(spans) * 1e6
                results[label].append(per_span)
                print(f"round {round_ + 1} {label:>12}: {per_span:6.1f} us CPU/span; "
                      f"{stats.inserts} inserts, {stats.sql_inserts} by SQL, "
                      f"{stats.inserts - stats.sql_inserts} by Python, "
                      f"{stats.python_path_messages} messages of SQL batches in Python",
                      flush=True)  # fmt: skip
    finally:
        broker.stop()
    print(f"{sum(spans):,} spans per run at {args.rate:,.0f} spans/s")
    (base, base_runs), *_, (last, last_runs) = results.items()
    mean = sum(last_runs) / len(last_runs) / (sum(base_runs) / len(base_runs))
    print(f"CPU per span {last} / {base}: {mean:.2f}")


if __name__ == "__main__":
    main()
