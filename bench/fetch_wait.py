"""How late records reach a consumer, by its `fetch_max_wait_ms`, against the bundled broker.

Starts the bundled Tansu broker with pathgrade's topics and, at the same time, one consumer
process per setting (each its own group on `pathgrade.spans`, with the realtime plane's
poll size), then produces trace-sized messages at a steady rate from this process. Each
consumer records, for every message produced after the warm-up, the lag from the message's
timestamp to the poll that returned it, and its own process CPU. Prints p50/p99/max lag and
CPU per setting, and the ratios of each setting to the first (the baseline: kafka-python's
default 500 ms), all measured in the same run under the same traffic.

With `--idle`, each setting gets a broker of its own and no traffic: the CPU of the idle
consumer and of its broker per second (what an idle stack's realtime plane costs), then the
lag of single messages sent a second apart (whether a held fetch is answered when a record
arrives, or only when its wait ends), with ratios to the first setting.

    python bench/fetch_wait.py [--waits 500,100] [--rate 1000] [--seconds 15] [--idle]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import process_cpu_s
from kafka import KafkaConsumer, KafkaProducer
from pathgrade.schemas.topics import SPANS_TOPIC
from pathgrade.transport.kafka_settings import consumer_settings, kafka_client_settings

from pathgrade.stack.broker import LocalBroker, ensure_topics

MESSAGE_BYTES = 3000  # about one demo trace of 5 spans as the collector publishes it


@dataclass
class Result:
    wait_ms: int
    lags_ms: list[float]
    cpu_s: float

    def lag(self, q: float) -> float:
        ordered = sorted(self.lags_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def consume(bootstrap: str, wait_ms: int, measure_from_ms: float, until: float, out) -> None:
    """One consumer (child process): lags of messages stamped from `measure_from_ms` on."""
    consumer = KafkaConsumer(
        SPANS_TOPIC,
        **consumer_settings(
            bootstrap, f"bench-fetch-wait-{wait_ms}", max_poll_records=2000,
            fetch_max_wait_ms=wait_ms,
        ),
    )  # fmt: skip
    started_cpu = time.process_time()
    lags = []
    while time.time() < until:
        records = consumer.poll(timeout_ms=50)
        now_ms = time.time() * 1000
        lags += [
            now_ms - m.timestamp
            for messages in records.values()
            for m in messages
            if m.timestamp >= measure_from_ms
        ]
    out.send((wait_ms, lags, time.process_time() - started_cpu))
    consumer.close()


def produce(bootstrap: str, rate: float, until: float) -> int:
    """Trace-sized messages with random trace-id keys at `rate` per second until `until`."""
    producer = KafkaProducer(
        **kafka_client_settings(bootstrap), linger_ms=5, acks="all", batch_size=512 * 1024
    )
    value = os.urandom(MESSAGE_BYTES)
    sent, started = 0, time.monotonic()
    while time.time() < until:
        producer.send(SPANS_TOPIC, value, os.urandom(16).hex().encode())
        sent += 1
        time.sleep(max(0.0, started + sent / rate - time.monotonic()))
    producer.close()
    return sent


def idle(wait_ms: int, seconds: float, probes: int = 8) -> tuple[float, float, list[float]]:
    """One setting on a broker of its own with no traffic: CPU per second of the consumer
    (this process) and of the broker over `seconds`, then the lags (ms) of `probes`
    single messages sent a second apart."""
    broker = LocalBroker()
    broker.start()
    try:
        ensure_topics(broker.bootstrap)
        consumer = KafkaConsumer(
            SPANS_TOPIC,
            **consumer_settings(bootstrap := broker.bootstrap, f"bench-idle-{wait_ms}",
                                fetch_max_wait_ms=wait_ms),
        )  # fmt: skip
        consumer.poll(timeout_ms=3000)  # joined
        assert broker.pid is not None
        consumer_cpu, broker_cpu = time.process_time(), process_cpu_s(broker.pid)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            consumer.poll(timeout_ms=500)
        consumer_cpu = (time.process_time() - consumer_cpu) / seconds
        broker_cpu = (process_cpu_s(broker.pid) - broker_cpu) / seconds
        producer = KafkaProducer(**kafka_client_settings(bootstrap))
        lags = []
        for _ in range(probes):
            time.sleep(1.0)
            sent = time.monotonic()
            producer.send(SPANS_TOPIC, b"probe")
            producer.flush()
            while not consumer.poll(timeout_ms=100):
                pass
            lags.append((time.monotonic() - sent) * 1000)
        producer.close()
        consumer.close()
        return consumer_cpu, broker_cpu, lags
    finally:
        broker.stop()


def print_idle(waits: list[int], seconds: float) -> None:
    """`--idle`: every setting in turn, with ratios to the first."""
    print(f"idle consumer and its broker over {seconds:.0f} s, then single messages 1 s apart")
    print("fetch_max_wait_ms  consumer CPU/s  broker CPU/s  probe lag p50 ms  max ms")
    rows = [(wait_ms, *idle(wait_ms, seconds)) for wait_ms in waits]
    for wait_ms, consumer, broker, lags in rows:
        print(f"{wait_ms:>17}  {consumer:>14.4f}  {broker:>12.4f}  "
              f"{statistics.median(lags):>16.0f}  {max(lags):>6.0f}")  # fmt: skip
    _, base_consumer, base_broker, _ = rows[0]
    for wait_ms, consumer, broker, _ in rows[1:]:
        print(f"ratio {wait_ms} / {rows[0][0]} ms: consumer and broker CPU "
              f"{(consumer + broker) / (base_consumer + base_broker):.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--waits", default="500,100", help="fetch_max_wait_ms values; first = baseline"
    )
    parser.add_argument("--rate", type=float, default=1000.0, help="messages per second")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured time")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured time first")
    parser.add_argument("--idle", action="store_true", help="no traffic: idle CPU, wake-up lag")
    args = parser.parse_args()
    waits = [int(w) for w in args.waits.split(",")]
    if args.idle:
        print_idle(waits, args.seconds)
        return

    broker = LocalBroker()
    broker.start()
    try:
        ensure_topics(broker.bootstrap)
        context = multiprocessing.get_context("spawn")
        begin = time.time() + 3.0  # the consumers join their groups meanwhile
        measure_from_ms = (begin + args.warmup) * 1000
        until = begin + args.warmup + args.seconds
        children = []
        for wait_ms in waits:
            receive, send = context.Pipe(duplex=False)
            child = context.Process(
                target=consume, args=(broker.bootstrap, wait_ms, measure_from_ms, until + 2, send)
            )
            child.start()
            children.append((child, receive))
        time.sleep(max(0.0, begin - time.time()))
        sent: list[int] = []
        producer = threading.Thread(
            target=lambda: sent.append(produce(broker.bootstrap, args.rate, until))
        )
        producer.start()
        producer.join()
        results = []
        for child, receive in children:
            results.append(Result(*receive.recv()))
            child.join()
    finally:
        broker.stop()

    print(f"{sent[0]} messages of {MESSAGE_BYTES} bytes at {args.rate:,.0f}/s; lag = message "
          f"timestamp -> the poll that returned it, over {args.seconds:.0f} s after "
          f"{args.warmup:.0f} s of warm-up")  # fmt: skip
    print("fetch_max_wait_ms  messages  lag p50 ms  p99 ms  max ms  consumer CPU s")
    for r in results:
        print(f"{r.wait_ms:>17}  {len(r.lags_ms):>8}  {r.lag(0.5):>10.0f}  {r.lag(0.99):>6.0f}  "
              f"{max(r.lags_ms, default=float('nan')):>6.0f}  {r.cpu_s:>14.2f}")  # fmt: skip
    base = results[0]
    for r in results[1:]:
        print(f"ratio {r.wait_ms} / {base.wait_ms} ms: lag p99 {r.lag(0.99) / base.lag(0.99):.2f}, "
              f"consumer CPU {r.cpu_s / base.cpu_s:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
