"""How fast the store writer drains a backlog, this checkout against another in one run.

Each run is a child process of its checkout's python: it starts a bundled Tansu broker,
produces `--spans` spans of `pathgrade.spans` values (bench/store_insert.py's: the
realistic mix forwarded as the collector does on default settings) to a topic of its own,
then runs a `StoreWriter` with its default settings into a fresh embedded store (chDB in
that process) from the moment the writer has its partitions until it has inserted every
span. It prints the spans per second that took (wall) and the process's CPU per span
(all threads: the writer, kafka-python's, chDB's). The checkouts alternate for
`--rounds` rounds; the last lines are the medians and the ratios this / against. This is
the writer catching up after a burst or an outage, where reading and inserting in turn
(or at once) decides how soon the store has everything.

    python bench/store_writer_backlog.py [--spans 200000] [--rounds 4] [--against PYTHON]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHILD_FLAG = "--drain-once"


def drain_once(spans_wanted: int) -> dict[str, float]:
    """Produce the backlog, then time the writer draining it (in this process)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from pathgrade.batch_plane.store.client import embedded_dsn, open_client_store
    from pathgrade.batch_plane.store.otlp_insert import pending_message
    from pathgrade.batch_plane.store.writer import StoreWriter
    from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
    from pathgrade.schemas.migrations import migrate
    from store_insert import forwarded_values
    from store_writer_rate import produce

    from pathgrade.stack.broker import LocalBroker
    from pathgrade.stack.gc_schedule import schedule_full_collections

    schedule_full_collections()  # as the store owner does
    template = forwarded_values(20_000, "realistic")
    counts = [pending_message(v, "", 0).spans for v in template]
    values, spans = [], []
    while sum(spans) < spans_wanted:
        values.extend(template)
        spans.extend(counts)
    with tempfile.TemporaryDirectory(prefix="pathgrade-writer-backlog-") as data_dir:
        broker = LocalBroker(log_path=Path(data_dir) / "broker.log")
        broker.start()
        try:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            admin.create_topics([NewTopic("backlog", 1, 1)])
            admin.close()
            produce(broker.bootstrap, "backlog", values, spans, rate=float("inf"))
            store = open_client_store(embedded_dsn(str(Path(data_dir) / "store")))
            migrate(store.client)
            config = StoreWriterConfig(
                bootstrap_servers=broker.bootstrap, topic="backlog", group_id="backlog.writer"
            )
            writer = StoreWriter(config, store)
            while not writer.consumer.assignment():  # joined before the clock starts
                writer.poll_once()
            started, cpu_started = time.perf_counter(), time.process_time()
            while writer.stats.spans + writer.stats.rejected_spans < sum(spans):
                writer.poll_once()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            inserts = writer.stats.inserts
            writer.close()
            store.close()
        finally:
            broker.stop()
    return {"spans": sum(spans), "rate": sum(spans) / wall, "cpu_us": cpu / sum(spans) * 1e6,
            "inserts": inserts}  # fmt: skip


def run_child(python: str, spans: int) -> dict[str, float]:
    """One drain in a child process of `python`; its figures."""
    out = subprocess.run(
        [python, __file__, CHILD_FLAG, str(spans)], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{python}: the drain failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--against", metavar="PYTHON", help="the other checkout's python")
    args = parser.parse_args()
    variants = {"this": sys.executable}
    if args.against:
        variants = {"against": args.against, **variants}
    results: dict[str, list[dict[str, float]]] = {label: [] for label in variants}
    for round_ in range(args.rounds):
        for label, python in variants.items():
            figures = run_child(python, args.spans)
            results[label].append(figures)
            print(f"round {round_ + 1} {label:>8}: {figures['rate']:8,.0f} spans/s, "
                  f"{figures['cpu_us']:5.1f} us CPU/span, {figures['inserts']:.0f} inserts",
                  flush=True)  # fmt: skip
    medians = {
        label: {k: statistics.median(r[k] for r in runs) for k in ("rate", "cpu_us")}
        for label, runs in results.items()
    }
    spans = results["this"][0]["spans"]
    print(f"{spans:,.0f} spans per run; medians of {args.rounds} runs:")
    for label, median in medians.items():
        print(f"  {label:>8}: {median['rate']:8,.0f} spans/s, {median['cpu_us']:5.1f} us CPU/span")
    if args.against:
        this, against = medians["this"], medians["against"]
        print(f"spans/s this / against: {this['rate'] / against['rate']:.2f}; "
              f"CPU per span this / against: {this['cpu_us'] / against['cpu_us']:.2f}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == CHILD_FLAG:
        print(json.dumps(drain_once(int(sys.argv[2]))))
    else:
        main()
