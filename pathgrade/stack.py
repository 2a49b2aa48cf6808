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
from pathgrade.query import RemoteStore
from pathgrade.store_owner import StoreOwner
from realtime_plane import RealtimeConfig, RealtimePlane

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
    _child_setup("collector")
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


def _child_setup(name: str) -> None:
    """Signals belong to the parent (it stops children in order); quiet Kafka logging."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s {name} %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _realtime_main(config: dict[str, Any], store_url: str, events: Any, stop: Any) -> None:
    """Child process: the realtime plane (its own interpreter, so detection never waits
    on the store writer), storing alerts through the store owner's endpoint."""
    _child_setup("realtime")
    plane = RealtimePlane(RealtimeConfig.model_validate(config), RemoteStore(store_url))
    try:
        plane.start()
    except Exception as exc:
        events.put(("error", str(exc)))
        return
    events.put(("ready", None))
    stop.wait()
    plane.stop()
    events.put(("stopped", None))


class _Child:
    """One child process that reports ("ready"|"error"|"stopped", payload) on a queue and
    stops when its event is set."""

    def __init__(self, ctx: Any, name: str, target: Any, *args: Any) -> None:
        self.name = name
        self.events = ctx.Queue()
        self.stop_event = ctx.Event()
        self.process = ctx.Process(
            target=target, args=(*args, self.events, self.stop_event), name=name
        )

    def start(self, timeout_s: float = 60) -> Any:
        """Start and wait for "ready"; returns its payload, raises with the child's error."""
        self.process.start()
        try:
            kind, payload = self.events.get(timeout=timeout_s)
        except queue.Empty:
            message = f"the {self.name} process did not start in {timeout_s:.0f} s"
            raise RuntimeError(message) from None
        if kind == "error":
            raise RuntimeError(payload)
        return payload

    def alive(self) -> bool:
        return self.process.is_alive()

    def stop(self, timeout_s: float = 60) -> Any:
        """Ask it to stop; returns the "stopped" payload (None if it died without one)."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        payload = None
        while time.monotonic() < deadline:
            try:
                kind, payload = self.events.get(timeout=1)
            except queue.Empty:
                if not self.process.is_alive():
                    break
                continue
            if kind == "stopped":
                break
        self.process.join(timeout=30)
        return payload


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
        self._collector: _Child | None = None
        self._realtime: _Child | None = None
        self._demo: threading.Thread | None = None
        self.grpc_port = 0
        self.http_port = 0

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start_kafka()
            self.store = StoreOwner(self.bootstrap, self.data_dir, self.options.clickhouse)
            self.store.start()
            if self.store.applied:
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in self.store.applied)
                self.out(f"applied migrations: {names}")
            self._start_realtime()
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
        self._collector = _Child(self._ctx, "collector", _collector_main, config)
        self.grpc_port, self.http_port = self._collector.start()

    def _start_realtime(self) -> None:
        assert self.store is not None and self.store.query_server is not None
        config = RealtimeConfig(
            bootstrap_servers=self.bootstrap,
            policy_path=self.options.policy,
            webhook_url=self.options.alert_webhook,
        )
        self._realtime = _Child(
            self._ctx, "realtime", _realtime_main, config.model_dump(), self.store.query_server.url
        )
        self._realtime.start()

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
                dead = [c.name for c in (self._collector, self._realtime) if c and not c.alive()]
                if dead:
                    self.out(f"the {dead[0]} process exited unexpectedly; stopping")
                    break
            self.out("stopping: flushing the collector and the store writer...")
            self.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def stop(self) -> None:
        """Flush everything in order and release the data directory: the demo, the
        collector (its produced offsets), the realtime plane, the store writer up to
        those offsets, the broker."""
        self.stop_event.set()
        if self._demo is not None:
            self._demo.join(timeout=30)
        offsets: dict[int, int] = {}
        if self._collector is not None:
            offsets = self._collector.stop() or {}
        if self._realtime is not None:
            self._realtime.stop()
        if self.store is not None:
            self.store.stop(offsets)
        if self.broker is not None:
            self.broker.stop()
