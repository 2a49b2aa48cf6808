"""`pathgrade up`: every box on one machine.

The main process owns the store (one owner per chDB directory): it runs migrations, the
store writer and the loopback query endpoint. The collector runs in a child process (its
own core). With no `--kafka`, the bundled Tansu broker runs as a third process.

Shutdown (SIGINT/SIGTERM): the collector stops accepting and flushes to Kafka (or its
spill), reports the offsets it produced, and the store writer consumes up to them before
exiting, so what was acknowledged is in the store after exit.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batch_plane.store import redact_dsn
from collector.service import Collector, CollectorConfig
from pathgrade.broker import LocalBroker, ensure_topics, wait_for_kafka
from pathgrade.store_owner import StoreOwner
from realtime_plane import RealtimeConfig

log = logging.getLogger(__name__)


@dataclass
class StackOptions:
    """Options of `pathgrade up`."""

    data_dir: Path
    kafka: str | None = None
    clickhouse: str | None = None
    demo: bool = False
    demo_rate_per_s: float = 2.0
    policy: str | None = None
    alert_webhook: str | None = None
    collector: dict[str, Any] = field(default_factory=dict)


def _collector_main(config: dict[str, Any], events: Any, stop: Any) -> None:
    """Child process: run the collector until `stop`, then report produced offsets."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s collector %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    collector = Collector(CollectorConfig.model_validate(config))
    try:
        collector.start()
    except Exception as exc:
        events.put(("error", str(exc)))
        return
    events.put(("ready", (collector.grpc_port, collector.http_port)))
    stop.wait()
    collector.stop()
    assert collector.publisher is not None
    events.put(("stopped", collector.publisher.produced_offsets()))


class Stack:
    """The embedded stack's processes and threads; `start()`, `wait()`, `stop()`."""

    def __init__(self, options: StackOptions, out: Any = print) -> None:
        self.options = options
        self.out = out
        self.data_dir = options.data_dir.resolve()
        self.broker: LocalBroker | None = None
        self.bootstrap = options.kafka or ""
        self.store: StoreOwner | None = None
        self.stop_event = threading.Event()
        self._ctx = mp.get_context("spawn")
        self._collector_stop = self._ctx.Event()
        self._collector_events = self._ctx.Queue()
        self._collector: Any = None
        self._demo: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_kafka()
            realtime = RealtimeConfig(
                bootstrap_servers=self.bootstrap,
                policy_path=self.options.policy,
                webhook_url=self.options.alert_webhook,
            )
            self.store = StoreOwner(
                self.bootstrap, self.data_dir, self.options.clickhouse, realtime
            )
            self.store.start()
            if self.store.applied:
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in self.store.applied)
                self.out(f"applied migrations: {names}")
            self._start_collector()
        except BaseException:
            self.stop()
            raise
        self.store.publish_state({"grpc_port": self.grpc_port, "http_port": self.http_port})
        self._print_endpoints()
        if self.options.demo:
            self._start_demo()

    def _start_kafka(self) -> None:
        if self.options.kafka:
            wait_for_kafka(self.options.kafka, timeout_s=10)
        else:
            self.broker = LocalBroker(log_path=self.data_dir / "broker.log")
            self.broker.start()
            self.bootstrap = self.broker.bootstrap
        ensure_topics(self.bootstrap)

    def _start_collector(self) -> None:
        config = {
            "kafka_bootstrap": self.bootstrap,
            "spill_dir": str(self.data_dir / "spill"),
            **self.options.collector,
        }
        self._collector = self._ctx.Process(
            target=_collector_main,
            args=(config, self._collector_events, self._collector_stop),
            name="pathgrade-collector",
        )
        self._collector.start()
        kind, payload = self._collector_events.get(timeout=60)
        if kind == "error":
            raise RuntimeError(payload)
        self.grpc_port, self.http_port = payload

    def _start_demo(self) -> None:
        from pathgrade.demo import run_demo

        url = f"http://127.0.0.1:{self.http_port}"

        def demo() -> None:
            summary = run_demo(
                url, traces=0, rate_per_s=self.options.demo_rate_per_s, stop=self.stop_event
            )
            self.out(f"demo sent {summary.traces} traces ({summary.spans} spans)")

        self._demo = threading.Thread(target=demo, name="demo", daemon=True)
        self._demo.start()

    def _print_endpoints(self) -> None:
        assert self.store is not None
        kafka = f"{self.bootstrap} (bundled Tansu, memory-only)" if self.broker else self.bootstrap
        host = self.options.collector.get("listen_host", "127.0.0.1")
        webhook = (
            f"webhook {self.options.alert_webhook}" if self.options.alert_webhook else "no webhook"
        )
        self.out(
            "\n".join(
                [
                    f"pathgrade is up (data in {self.data_dir})",
                    f"  OTLP/gRPC   {host}:{self.grpc_port}",
                    f"  OTLP/HTTP   http://{host}:{self.http_port}/v1/traces",
                    f"  Kafka       {kafka}",
                    f"  ClickHouse  {redact_dsn(self.store.dsn)}",
                    f"  alerts      table alerts, topic pathgrade.alerts, {webhook}",
                    f"  policy      {self.options.policy or '(default: hints from the spans)'}",
                    f"  query       pathgrade sql --data-dir {self.data_dir} "
                    '"SELECT count() FROM spans"',
                    "Ctrl-C stops it; what was acknowledged is stored before it exits.",
                ]
            )
        )

    def run_until_signalled(self) -> None:
        """Serve until SIGINT/SIGTERM (or the collector dying), then stop in order.

        The handlers stay installed through the shutdown, so a second Ctrl-C cannot cut
        the flush short.
        """

        def on_signal(*_: Any) -> None:
            if self.stop_event.is_set():
                self.out("still stopping: flushing what was acknowledged to the store...")
            self.stop_event.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            while not self.stop_event.wait(1.0):
                if self._collector is not None and not self._collector.is_alive():
                    self.out("the collector process exited unexpectedly; stopping")
                    break
            self.out("stopping: flushing the collector and the store writer...")
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Flush everything in order and release the data directory."""
        self.stop_event.set()
        if self._demo is not None:
            self._demo.join(timeout=30)
        offsets: dict[int, int] = {}
        if self._collector is not None:
            self._collector_stop.set()
            offsets = self._await_collector_offsets()
            self._collector.join(timeout=30)
        if self.store is not None:
            self.store.stop(offsets)
        if self.broker is not None:
            self.broker.stop()

    def _await_collector_offsets(self) -> dict[int, int]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                kind, payload = self._collector_events.get(timeout=1)
            except queue.Empty:
                if not self._collector.is_alive():
                    return {}
                continue
            if kind == "stopped":
                return payload
        return {}
