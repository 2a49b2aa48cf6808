"""`pathgrade up`: every box on one machine.

The main process owns the store (one owner per chDB directory): it runs migrations, the
store writer, the loopback query endpoint and, with `--export-otlp`, the results exporter
(a thread that sends stored scores and alerts out as OTLP log records). The collector runs
in a child process (its own core). With no `--kafka`, the bundled Tansu broker runs as a
third process.

Shutdown (SIGINT/SIGTERM): the collector stops accepting and flushes to Kafka (or its
spill), reports the offsets it produced, and the realtime plane and the store writer
consume up to them before exiting, so what was acknowledged is in the store after exit.

The bundled broker keeps everything in memory with no retention; past `broker_max_mb`
resident it is swapped for a fresh one on a new port, its readers joined there before the
collector moves to it and reading the old one to what it produced there
(`Stack.swap_broker`), so a long-running stack stays bounded and detection goes on. A
broker that dies is replaced within seconds by a fresh one on a new port, into which the
collector's durable log replays what the readers had not committed
(`Stack.replace_dead_broker`). It has no authentication and listens on
loopback, where any local account can reach it: the stack's processes sign what they write
with a key made for this stack (`transport.message_auth`) and refuse what is not signed with it.

Supervision restarts a child process or the broker that died, at most MAX_RESTARTS times
within RESTART_WINDOW_S; past that, or when a restart fails, the stack stops within
seconds and `run_until_signalled` returns why (`pathgrade up` exits 1 with it).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka.errors import KafkaError

from pathgrade.batch_plane.store.client import engine_bounds, redact_dsn
from pathgrade.collector.counters import IngestCounters
from pathgrade.collector.spill import SpillFile, logs_spill_dir
from pathgrade.content.fingerprints import FactSecret
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.counters import AssemblerStats, RealtimeCounters
from pathgrade.schemas.topics import (
    REALTIME_GROUP,
    SAMPLED_TOPIC,
    SCORER_GROUP,
    SPANS_TOPIC,
    STORE_GROUP,
    TURNS_TOPIC,
)
from pathgrade.stack.alert_lines import AlertLineSettings, LogFormat
from pathgrade.stack.broker import LocalBroker, ensure_topics, topic_partitions, wait_for_kafka
from pathgrade.stack.carry import carry_unread
from pathgrade.stack.children import ChildProcess, SharedCounters
from pathgrade.stack.collector_child import collector_main
from pathgrade.stack.messages import (
    CollectorReady,
    CollectorStopped,
    Counted,
    HandOver,
    Held,
    Hold,
    OldBrokerRead,
    Prepare,
    Prepared,
    RealtimeStopped,
    Resume,
    Stats,
    Stop,
    Suspended,
)
from pathgrade.stack.metrics import MetricsServer, prometheus_text
from pathgrade.stack.options import StackOptions
from pathgrade.stack.ownership import broker_lease, process_started
from pathgrade.stack.priority import lower_thread_priority
from pathgrade.stack.realtime_child import realtime_main
from pathgrade.stack.settings import (
    StackSettingsError,
    check_collector,
    check_export,
    check_policy,
    check_realtime,
)
from pathgrade.stack.status import (
    Snapshot,
    plus_earlier,
    snapshot_of,
    snapshot_samples,
    status_line,
    summed,
)
from pathgrade.stack.store_access import facts_key_file
from pathgrade.stack.store_owner import StoreOwner
from pathgrade.transport.drain import DRAIN_IDLE_S
from pathgrade.transport.kafka_settings import KAFKA_SETTINGS_PREFIX
from pathgrade.transport.message_auth import MESSAGE_KEY_FILE, MessageKey, message_key_from_env

if TYPE_CHECKING:
    from pathgrade.batch_plane.export.exporter import ResultExporter

log = logging.getLogger(__name__)

BROKER_SWAP_MIN_INTERVAL_S = 30.0
MAX_RESTARTS = 3
"""Child processes restarted within RESTART_WINDOW_S before the stack gives up and stops."""
RESTART_WINDOW_S = 300.0
GROUP_JOIN_TIMEOUT_S = 30.0  # "up" waits this long for the consumers' first group joins
STATUS_TIMEOUT_S = 5.0  # a child slower than this to report its counters shows as null
_MB = 1024 * 1024


class Stack:
    """The embedded stack's processes and threads; `start()`, `wait()`, `stop()`."""

    def __init__(self, options: StackOptions, out: Any = print) -> None:
        self.options = options
        self.out = out
        self.data_dir = options.data_dir.resolve()
        self.spill_dir = self.data_dir / "spill"
        self.broker: LocalBroker | None = None
        self.bootstrap = options.kafka or ""
        self.store: StoreOwner | None = None
        self.stop_event = threading.Event()
        self._ctx = mp.get_context("spawn")
        self._collector: ChildProcess | None = None
        self._realtime: list[ChildProcess] = []
        self._realtime_joined: list[Any] = []  # per realtime process: its `joined` Event
        self._earlier: dict[str, dict[str, int]] = {}  # by child: what the dead ones counted
        self._demo: threading.Thread | None = None
        self._demo_pages: threading.Thread | None = None  # seeds the demo's pages
        self._exposed_metrics: MetricsServer | None = None  # --metrics-listen
        self.exporter: ResultExporter | None = None
        self.grpc_port = 0
        self.http_port = 0
        self.swaps = 0
        self.restarted: Counter[str] = Counter()  # by process: restarts (the broker: replaced)
        self._last_swap = float("-inf")
        self._restarts: list[float] = []
        self._last_status: Snapshot | None = None
        self._next_status = 0.0  # monotonic seconds of the next status line
        self._state_unsaved = False  # stack.json is behind (the disk refused it)
        self.final_status: Snapshot | None = None  # what every process did, once stopped
        self.message_key: MessageKey | None = None  # signs the stack's Kafka messages

    def start(self) -> None:
        """Check the settings, take the data directory (stopping what an earlier stack on
        it left running), then start the broker, the store owner, the realtime processes
        and the collector; on any failure, stop what started and raise."""
        self.message_key = self._message_key()
        with _interrupt_after():  # pydantic would wrap a KeyboardInterrupt raised inside
            check_collector(self._collector_config())
            check_realtime(self._realtime_settings())
            check_policy(self.options.policy)
            export = None if self.options.export is None else check_export(self.options.export)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        FactSecret.load_or_create(facts_key_file(self.data_dir))  # offline scoring reads it too
        self.store = StoreOwner(
            self.bootstrap, self.data_dir, self.options.clickhouse,
            self.options.store_writer_niceness, self._tokens_file, self.options.retention,
            self.message_key,
            engine_bounds(self.options.store_memory_mb, self.options.store_cache_mb),
        )  # fmt: skip
        try:
            for stale in self.store.claim():
                self.out(f"stopped {stale}, left running by an earlier pathgrade up")
            if self.message_key is not None and not self.options.kafka:
                # in the data directory the claim made owner-only: for boxes joining the broker
                self.message_key.write(self.data_dir / MESSAGE_KEY_FILE)
            self._start_kafka()
            self.store.bootstrap = self.bootstrap
            self.store.start()
            self._expose_metrics()
            if self.store.applied:
                names = ", ".join(f"{m.version:04d}_{m.name}" for m in self.store.applied)
                self.out(f"applied migrations: {names}")
            for index in range(self.options.realtime_workers):
                self._start_realtime(index)
            if export is not None:
                assert self.store.store is not None
                from pathgrade.batch_plane.export.exporter import ResultExporter  # only with it

                self.exporter = ResultExporter(export, self.store.store)
                self.exporter.start()
            self._start_collector()
            self._wait_for_consumer_groups()
        except BaseException:
            self.stop()
            raise
        self._publish_state()
        self._print_endpoints()
        if self.options.demo:
            self._start_demo()

    def _message_key(self) -> MessageKey | None:
        """The key the stack's processes sign and check their Kafka messages with: a fresh
        one for the bundled broker (which anyone on the machine can reach); with `--kafka`,
        the deployment's from $PATHGRADE_KAFKA_MESSAGE_KEY_FILE, or none."""
        if not self.options.kafka:
            return MessageKey.generate()
        try:
            return message_key_from_env()
        except ValueError as exc:
            raise StackSettingsError(str(exc)) from None

    def _expose_metrics(self) -> None:
        """`--metrics-listen`: the latest snapshot's metrics at the address the user chose,
        without the owner's token (OSError naming the address when it cannot listen)."""
        listen = self.options.metrics_listen
        if listen is None:
            return
        assert self.store is not None and self.store.query_server is not None
        server = self.store.query_server
        try:
            self._exposed_metrics = MetricsServer(*listen, lambda: server.metrics_text)
        except OSError as exc:
            raise OSError(
                f"--metrics-listen {listen[0]}:{listen[1]}: {exc.strerror or exc}"
            ) from exc
        self._exposed_metrics.start()

    def _wait_for_consumer_groups(self) -> None:
        """Wait until the store writer and every realtime process have joined their
        consumer groups (a fresh broker's first joins take seconds), so that "up" means
        spans are being stored and evaluated; past GROUP_JOIN_TIMEOUT_S, say so and go on
        (what is sent meanwhile waits in Kafka)."""
        late = self.unjoined_consumers(GROUP_JOIN_TIMEOUT_S)
        if late:
            self.out(
                f"{' and '.join(late)} did not join the consumer groups in "
                f"{GROUP_JOIN_TIMEOUT_S:.0f} s; spans sent now wait in Kafka until they do"
            )

    def unjoined_consumers(self, timeout_s: float = 0.0) -> list[str]:
        """The consumers (the store writer, each realtime process) that have not joined
        their consumer group within `timeout_s` from now."""
        assert self.store is not None
        deadline = time.monotonic() + timeout_s
        waits = [("the store writer", self.store.writer_joined)] + [
            (child.name, joined.wait)
            for child, joined in zip(self._realtime, self._realtime_joined, strict=True)
        ]
        return [name for name, wait in waits if not wait(max(0.0, deadline - time.monotonic()))]

    def _start_kafka(self) -> None:
        if self.options.kafka:
            wait_for_kafka(self.options.kafka, timeout_s=10)
        else:
            _ignore_kafka_security_settings()
            self.broker = LocalBroker(log_path=self.data_dir / "broker.log")
            self.broker.start()
            self.bootstrap = self.broker.bootstrap
        ensure_topics(self.bootstrap)
        workers = self.options.realtime_workers
        if workers > 1 and workers > (partitions := topic_partitions(self.bootstrap, SPANS_TOPIC)):
            raise RuntimeError(
                f"--realtime-workers {workers}: {SPANS_TOPIC} has {partitions} partitions, so "
                f"at most {partitions} realtime processes would get any work"
            )

    def _publish_state(self) -> None:
        """Ports and process ids in `stack.json` for other commands and operators, with
        each process's start time (`ownership.process_started`): a later stack on this
        directory recognises the ones still running after a crash. A disk that refuses
        the file is logged, and the file written again on the next round (`_tend`)."""
        assert self.store is not None
        pids = {c.name: c.pid for c in self._children() if c is not None}
        pids["broker"] = self.broker.pid if self.broker else None
        state = {
            "grpc_port": self.grpc_port,
            "http_port": self.http_port,
            "pids": pids,
            "started": {name: pid and process_started(pid) for name, pid in pids.items()},
            "message_key_file": self.broker and str(self.data_dir / MESSAGE_KEY_FILE),
        }
        try:
            self.store.publish_state(state)
        except OSError as exc:
            if not self._state_unsaved:
                log.error("stack.json cannot be written, retrying: %s", exc)
            self._state_unsaved = True
            return
        self._state_unsaved = False

    def _collector_config(self) -> dict[str, Any]:
        """The collector's settings: the bundled broker keeps nothing on disk, so the
        collector acknowledges once on disk (`durable_log`) and keeps what the store writer
        and the realtime plane have not committed; with `--kafka`, its spill only holds what
        Kafka did not take."""
        config = {
            "kafka_bootstrap": self.bootstrap,
            "spill_dir": str(self.spill_dir),
            "facts_key_file": str(facts_key_file(self.data_dir)),
            "durable_log": not self.options.kafka,
            "log_groups": [STORE_GROUP, self.options.realtime.get("group_id", REALTIME_GROUP)],
            "policy": self.options.policy,  # its request patterns: the realtime plane's file
            **self.options.collector,
            "message_key": self.message_key and self.message_key.hex,
        }
        if self.http_port:  # a restart: the endpoints stay where clients point
            config.update(grpc_port=self.grpc_port, http_port=self.http_port)
        return config

    def _start_collector(self) -> None:
        counters = SharedCounters(self._ctx, IngestCounters)
        self._collector = ChildProcess(
            self._ctx, "collector", collector_main, self._collector_config(), shared=[counters]
        )
        ready = self._collector.start()
        assert isinstance(ready, CollectorReady)
        self.grpc_port, self.http_port = ready.grpc_port, ready.http_port

    def realtime_config(self) -> RealtimeConfig:
        """The realtime processes' settings: the settings file's, this stack's broker,
        policy and webhook, and shared turns when there are several processes."""
        return RealtimeConfig(**self._realtime_settings())

    def _realtime_settings(self) -> dict[str, Any]:
        return {
            **self.options.realtime,
            "bootstrap_servers": self.bootstrap,
            "policy_path": self.options.policy,
            "webhook_url": self.options.alert_webhook,
            "turns_topic": TURNS_TOPIC if self._shares_turns else None,
            "message_key": self.message_key and self.message_key.hex,
        }

    @property
    def _shares_turns(self) -> bool:
        """Several realtime processes share conversation turns (one needs no sharing)."""
        return self.options.realtime_workers > 1

    def _children(self) -> list[ChildProcess | None]:
        return [self._collector, *self._realtime]

    def _start_realtime(self, index: int) -> None:
        """Start (or restart) realtime process `index`; with several, they share turns."""
        assert self.store is not None and self.store.query_server is not None
        name = f"realtime-{index + 1}" if self._shares_turns else "realtime"
        server = self.store.query_server
        shared = [SharedCounters(self._ctx, RealtimeCounters),
                  SharedCounters(self._ctx, AssemblerStats)]  # fmt: skip
        joined = self._ctx.Event()
        child = ChildProcess(
            self._ctx, name, realtime_main, self.realtime_config().model_dump(),
            server.url, server.token, self.alert_lines(), joined, shared=shared,
        )  # fmt: skip
        if index < len(self._realtime):
            self._realtime[index], self._realtime_joined[index] = child, joined
        else:
            self._realtime.append(child)
            self._realtime_joined.append(joined)
        child.start()

    def alert_lines(self) -> AlertLineSettings:
        """How the realtime processes print alerts: linked to this stack's browser UI,
        the pace shared among the processes, a summary of the rest as often as the status
        line."""
        assert self.store is not None and self.store.ui_server is not None
        pace = AlertLineSettings()
        return AlertLineSettings(
            log_format=self.options.log_format,
            trace_url_base=self.store.ui_server.url,
            lines_per_s=pace.lines_per_s / self.options.realtime_workers,
            burst=max(1, pace.burst // self.options.realtime_workers),
            summary_every_s=self.options.status_every_s or pace.summary_every_s,
        )

    @property
    def _tokens_file(self) -> Path | None:
        """The collector's tokens file (the browser UI's viewers too), if any."""
        path = self.options.collector.get("tokens_file")
        return Path(path) if path else None

    def _demo_identity(self) -> tuple[str | None, str]:
        """(token, tenant) of demo traffic: with a tokens file, the file's first token and
        its tenant; else no token, tenant `default`."""
        if self._tokens_file is None:
            return None, "default"
        import yaml

        tokens = yaml.safe_load(self._tokens_file.read_text()) or {}
        token = next(iter(tokens), None)
        return (str(token), str(tokens[token])) if token is not None else (None, "default")

    def _start_demo(self) -> None:
        from pathgrade.demo.sender import run_demo

        url = f"http://127.0.0.1:{self.http_port}"
        token, tenant = self._demo_identity()
        headers = {"authorization": f"Bearer {token}"} if token else None

        def demo() -> None:
            summary = run_demo(
                url, traces=0, rate_per_s=self.options.demo_rate_per_s, stop=self.stop_event,
                headers=headers,
            )  # fmt: skip
            self.out(f"demo sent {summary.traces} traces ({summary.spans} spans)")

        self._demo = threading.Thread(target=demo, name="demo", daemon=True)
        self._demo.start()
        if not self.options.demo_pages:
            return
        pages = threading.Thread(
            target=self._seed_demo_pages, args=(url, token, tenant), name="demo-pages", daemon=True
        )
        self._demo_pages = pages
        pages.start()

    def _seed_demo_pages(self, otlp_url: str, token: str | None, tenant: str) -> None:
        """The demo's pages (`pathgrade.demo.pages`), seeded from a thread at the lowest
        priority, which the commands it runs inherit: they take the CPU the collector, the
        realtime plane and the store writer leave."""
        from pathgrade.batch_plane.store.demo_rows import DemoProgress
        from pathgrade.demo.pages import DemoSite, PageSeeder, examples_dir

        assert self.store is not None and self.store.store is not None
        assert self.store.ui_server is not None
        lower_thread_priority(19)
        examples = examples_dir()
        if examples is None:
            self.out("demo: no examples folder (a clone installed with `pip install -e .` has "
                     "it): the runs, gates, datasets and EDGE pages stay empty")  # fmt: skip
            return
        site = DemoSite(self.data_dir, otlp_url, self.store.ui_server.url, examples, tenant, token)
        PageSeeder(site, DemoProgress(self.store.store), self.stop_event, self.out).run()

    def _print_endpoints(self) -> None:
        assert self.store is not None and self.store.query_server is not None
        assert self.store.ui_server is not None
        kafka = (
            f"{self.bootstrap} (bundled Tansu, memory-only; swapped for a fresh one above "
            f"{self.options.broker_max_mb} MB)"
            if self.broker
            else self.bootstrap
        )
        host = self.options.collector.get("listen_host", "127.0.0.1")
        webhook = (
            f"webhook {self.options.alert_webhook}" if self.options.alert_webhook else "no webhook"
        )
        data = f"--data-dir {self.data_dir}"
        every = self.options.status_every_s
        lines = [
            f"pathgrade is up (data in {self.data_dir})",
            f"  OTLP/gRPC   {host}:{self.grpc_port}",
            f"  OTLP/HTTP   http://{host}:{self.http_port}/v1/traces",
            f"  Kafka       {kafka}",
            f"  ClickHouse  {redact_dsn(self.store.dsn)}",
            f"  alerts      table alerts, topic pathgrade.alerts, {webhook}; here "
            + _terminal_alerts(self.options.log_format),
            f"  policy      {self.options.policy or '(default: hints from the spans)'}",
        ]
        if self.exporter is not None:
            lines.append(
                f"  results out every score and alert as an OTLP log record to "
                f"{self.exporter.where} (gen_ai.evaluation.result, pathgrade.alert)"
            )
        if self.options.demo:
            lines.append(
                f"  demo        ON: demo agent traffic ({self.options.demo_rate_per_s:g} traces/s, "
                "with seeded failures) is sent to the collector until Ctrl-C"
            )
        if self.options.demo and self.options.demo_pages:
            from pathgrade.demo.pages import banner

            lines += banner(self.store.ui_server.url, self.data_dir)
        lines += [
            "Where to look:",
            f"  browser     {self.store.ui_server.url}/ (traces, alerts, gates, health)",
            f"  alerts      pathgrade alerts {data} [--follow]",
            f"  status      pathgrade status {data}"
            + (f" (a status line is printed here every {every:g} s)" if every else ""),
            *self._exposed_metrics_line(),
            f'  query       pathgrade sql {data} "SELECT count() FROM spans"',
            "Ctrl-C stops it; what was acknowledged is stored before it exits.",
        ]
        self.out("\n".join(lines))

    def _exposed_metrics_line(self) -> list[str]:
        """The banner's line for `--metrics-listen` (none without it)."""
        if self._exposed_metrics is None:
            return []
        host, port = self._exposed_metrics.server_address[:2]
        return [f"  metrics     http://{host}:{port}/metrics (no token: --metrics-listen)"]

    def run_until_signalled(self) -> str | None:
        """Serve until SIGINT/SIGTERM (or a failure `_supervise` cannot mend), then stop
        in order; returns that failure (None after a signal).

        The handlers stay installed through the shutdown, so a second Ctrl-C cannot cut
        the flush short.
        """

        def on_signal(*_: Any) -> None:
            if self.stop_event.is_set():
                self.out("still stopping: flushing what was acknowledged to the store...")
            self.stop_event.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        self._next_status = time.monotonic() + self.options.status_every_s
        problem = None
        try:
            while not self.stop_event.wait(1.0):
                try:
                    problem = self._tend()
                except Exception as exc:  # stop in order rather than hang on the children
                    log.exception("supervising the stack failed")
                    problem = f"supervising the stack failed: {type(exc).__name__}: {exc}"
                if problem:
                    self.out(f"{problem}; stopping")
                    break
            self.out("stopping: flushing the collector and the store writer...")
            self.stop()
            final = self.final_status
            self.out(status_line(final, label="stopped") if final else "stopped")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return problem

    def _tend(self) -> str | None:
        """One round of `run_until_signalled`: supervise, swap an outgrown broker, report
        the status when due; returns why the stack must stop, if it must."""
        problem = self._supervise()
        if problem:
            return problem
        if self._state_unsaved:
            self._publish_state()
        if self._broker_too_big():
            self.swap_broker()
        every = self.options.status_every_s
        if every and time.monotonic() >= self._next_status:
            self._next_status = time.monotonic() + every
            self.report_status()
        return None

    def snapshot(self) -> Snapshot:
        """Every process's counters now (`pathgrade.stack.status`), asked of the children
        at once, with what the processes a child replaced counted; a child that does not
        answer within STATUS_TIMEOUT_S shows as None."""
        assert self.store is not None and self._collector is not None
        children = [self._collector, *self._realtime]
        collector, *realtime = _in_parallel([
            lambda child=child: self._since_first(
                child, _counters_of(child.request(Stats(), Counted, STATUS_TIMEOUT_S))
            )
            for child in children
        ])  # fmt: skip
        return snapshot_of(
            collector,
            self.store.writer_stats(),
            realtime,
            self.broker.rss_bytes() if self.broker else None,
            self.restarted,
            self._exporter_counters(),
        )

    def _exporter_counters(self) -> dict[str, Any] | None:
        """The results exporter's counters (None: no export)."""
        return asdict(self.exporter.stats) if self.exporter is not None else None

    def _since_first(
        self, child: ChildProcess, counters: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """`counters` of `child` plus what the processes it replaced counted."""
        return plus_earlier(counters, self._earlier.get(child.name, {}))

    def report_status(self) -> None:
        """Print a status line when traffic moved since the last one, and serve the
        snapshot to `pathgrade status` (the store owner's `/status`)."""
        assert self.store is not None and self.store.query_server is not None
        now = self.snapshot()
        line = status_line(now, self._last_status)
        if line:
            self.out(line)
        self._last_status = now
        self.store.query_server.status = {"snapshot": now, "line": line or status_line(now)}
        self.store.query_server.metrics_text = prometheus_text(snapshot_samples(now))

    def stop(self) -> None:
        """Flush everything in order and release the data directory: the demo, the
        collector (its produced offsets), the realtime plane, the results exporter (its
        cursors saved: the next start sends what it had not), the store writer up to
        those offsets, the broker. With the bundled broker dead, at once instead
        (`_stop_without_broker`)."""
        self.stop_event.set()
        for demo in (self._demo, self._demo_pages):
            if demo is not None:
                demo.join(timeout=30)
        if self.broker is not None and self.broker.pid is not None and not self.broker.alive():
            self._stop_without_broker()
            return
        offsets: dict[int, int] = {}
        collector_counts = None
        sent: int | None = None  # log offset the collector's spill was sent up to
        logs_sent: int | None = None  # and its records' spill
        if self._collector is not None:
            stopped = self._collector.stop()
            if isinstance(stopped, CollectorStopped):
                offsets, collector_counts = stopped.produced, stopped.counters
                sent, logs_sent = stopped.sent, stopped.logs_sent
            collector_counts = self._since_first(self._collector, collector_counts)
        # The bundled broker's data ends with it: nothing held can be re-read later.
        realtime = _in_parallel([
            lambda child=child: child.stop(Stop(offsets, release_held=self.broker is not None))
            for child in self._realtime
        ])  # fmt: skip
        if self.exporter is not None:
            self.exporter.stop()
        stored = False
        if self.store is not None:
            stored = self.store.stop(offsets, DRAIN_IDLE_S if self.broker is not None else 0.0)
        if self.broker is not None:
            self.broker.stop()
        if self._exposed_metrics is not None:
            self._exposed_metrics.stop()
        evaluated = _all_reached(realtime, offsets)
        if sent is not None and stored and evaluated:
            _let_go_of_log(self.spill_dir, sent)
            if logs_sent is not None:
                _let_go_of_log(logs_spill_dir(self.spill_dir), logs_sent)
        if self.store is not None:
            self.final_status = snapshot_of(
                collector_counts,
                self.store.writer_stats(),
                [
                    self._since_first(child, answer.counters if answer else None)
                    for child, answer in zip(self._realtime, realtime, strict=True)
                ],
                None,
                self.restarted,
                self._exporter_counters(),
            )

    def _stop_without_broker(self) -> None:
        """Stop within seconds when the bundled broker died and was not replaced: nothing
        can be read up to anything, and what the processes had not committed is in the
        collector's log, which the next `pathgrade up` on the directory replays. So the
        children are killed (the collector acknowledged only what its log holds) and the
        store writer stores what it has read."""
        assert self.store is not None
        for child in self._children():
            if child is not None and child.pid is not None:
                self._end(child)
        if self.exporter is not None:
            self.exporter.stop()
        self.store.stop({}, timeout_s=30)
        self.final_status = snapshot_of(
            self._since_first(self._collector, {}) if self._collector else None,
            self.store.writer_stats(),
            [self._since_first(child, {}) for child in self._realtime],
            None,
            self.restarted,
            self._exporter_counters(),
        )

    def _supervise(self) -> str | None:
        """Replace a bundled broker that died (`replace_dead_broker`) and restart a child
        process that died (what it had not committed is re-read, its endpoints stay);
        returns why the stack must stop instead: a restart failed, or they keep dying
        (MAX_RESTARTS within RESTART_WINDOW_S)."""
        if self.broker is not None and not self.broker.alive():
            return self.replace_dead_broker()
        restarts = [(self._collector, self._start_collector)] + [
            (child, lambda index=index: self._start_realtime(index))
            for index, child in enumerate(self._realtime)
        ]
        for child, start in restarts:
            if child is None or child.alive():
                continue
            exited = f"the {child.name} process exited unexpectedly (code {child.process.exitcode})"
            refused = self._count_restart()
            if refused:
                return f"{exited} {refused}"
            self.out(f"{exited}; restarting it")
            self._note_counts(child)
            try:
                start()
            except RuntimeError as exc:
                return f"the {child.name} process could not be restarted: {exc}"
            self.restarted[child.name] += 1
            self._publish_state()
        return None

    def _count_restart(self) -> str | None:
        """Count a restart now; why not to, past MAX_RESTARTS within RESTART_WINDOW_S."""
        now = time.monotonic()
        self._restarts = [t for t in self._restarts if now - t < RESTART_WINDOW_S]
        if len(self._restarts) >= MAX_RESTARTS:
            return (
                f"and was restarted {MAX_RESTARTS} times in the last "
                f"{RESTART_WINDOW_S / 60:.0f} min already"
            )
        self._restarts.append(now)
        return None

    def _note_counts(self, child: ChildProcess) -> None:
        """Keep what `child` counted before it is replaced."""
        self._earlier[child.name] = summed([self._earlier.get(child.name, {}), child.counted()])

    def replace_dead_broker(self) -> str | None:
        """The bundled broker died with what it held: start a fresh one on a new port (no
        client of the dead one can reach it), with a new store writer and new realtime
        processes on it (what they had not committed is read again), and the collector
        sending its durable log into it from where every reader committed (nothing it
        acknowledged is lost: the log keeps what they have not committed). Returns why the
        stack must stop instead (a fresh broker did not start, or the restart cap)."""
        assert self.broker is not None and self._collector is not None
        assert self.store is not None
        exited = f"the bundled broker exited unexpectedly (code {self.broker.exit_code})"
        refused = self._count_restart()
        if refused:
            return f"{exited} {refused}"
        self.out(f"{exited}; starting a fresh one, into which the collector's log replays "
                 "what was not stored and evaluated yet")  # fmt: skip
        collector = self._collector
        with ThreadPoolExecutor(max_workers=1) as pool:
            settling = pool.submit(collector.request, Hold(), Held, 30)  # sends under way
            problem = self._readers_on_a_fresh_broker(exited)
            settling.result()
        if problem:
            return problem
        collector.send(Resume(True, self.bootstrap, broker_lost=True))
        self.restarted["broker"] += 1
        self._publish_state()
        self.out(f"a fresh broker serves on {self.bootstrap}; the collector replays its log "
                 "into it")  # fmt: skip
        return None

    def _readers_on_a_fresh_broker(self, exited: str) -> str | None:
        """Stop the store writer (storing and committing nothing more) and the realtime
        processes, start a fresh broker on a new port and them on it; why not, if not."""
        broker, store = self.broker, self.store
        assert broker is not None and store is not None
        store.drop_writer()
        for child in self._realtime:
            self._end(child)
        # in this thread: the broker ends with the thread that started it (PDEATHSIG)
        failed = _started(lambda: _serving(broker, broker.replace))
        if failed:
            return f"{exited} and a fresh one could not be started: {failed}"
        self.bootstrap = store.bootstrap = broker.bootstrap
        failed = _started(store.resume_writer)
        if failed:
            return f"the store writer could not be started on the fresh broker: {failed}"
        for index in range(len(self._realtime)):
            failed = _started(lambda index=index: self._start_realtime(index))
            if failed:
                return f"a realtime process could not be started on the fresh broker: {failed}"
        return None

    def _end(self, child: ChildProcess) -> None:
        """Kill `child` (what it had not committed is read again by the next one), keeping
        its counts; a child that has ended already is left as it is."""
        if child.process.exitcode is not None:
            return
        child.process.kill()
        child.process.join(timeout=30)
        self._note_counts(child)

    def _broker_too_big(self) -> bool:
        """The bundled broker outgrew `broker_max_mb` (and was not just swapped)."""
        limit = self.options.broker_max_mb * _MB
        return (
            self.broker is not None
            and limit > 0
            and time.monotonic() - self._last_swap >= BROKER_SWAP_MIN_INTERVAL_S
            and self.broker.rss_bytes() > limit
        )

    def swap_broker(self) -> bool:
        """Replace the bundled memory-only broker with a fresh one, losing nothing and
        keeping detection on time (`_swap_broker`). A replay publishing into the broker (it
        holds the broker lease) defers the swap. Returns whether the broker was swapped."""
        self._last_swap = time.monotonic()
        with broker_lease(self.data_dir, exclusive=True, wait=False) as leased:
            if not leased:
                log.warning("broker swap deferred: a replay is publishing into the broker")
                return False
            return self._swap_broker()

    def _swap_broker(self) -> bool:
        """A fresh broker starts on a new port with pathgrade's topics while everything
        runs on the old one; the store writer and the realtime processes join their groups
        on it beside their consumers of the old one (`hand_over_writer`, `Prepare`); then
        the collector switches to it at once (a hold only as long as its sends under way
        take) and the readers read the old broker up to what the collector produced there
        (the realtime plane evaluates every trace it still holds) and go on with the
        consumers already joined: nothing waits on a group join. Then the samples the
        online scorer has not read are carried over (`pathgrade.stack.carry`), the
        collector's log lets go of what the old broker held and the old broker stops. A
        reader that did not reach the offsets there has the collector send its log into the
        fresh broker again from where the readers committed (as when a broker dies)."""
        assert self.broker is not None and self._collector is not None
        assert self.store is not None
        old = self.broker
        before = old.rss_bytes()
        fresh = LocalBroker(log_path=old.log_path)
        failed = _started(lambda: _serving(fresh, fresh.start))
        if failed:
            fresh.stop()
            log.warning("broker swap abandoned: a fresh broker did not start: %s", failed)
            return False
        store = self.store
        _in_parallel([
            lambda: store.hand_over_writer(fresh.bootstrap, GROUP_JOIN_TIMEOUT_S),
            *(lambda child=child: child.request(Prepare(fresh.bootstrap), Prepared)
              for child in self._realtime),
        ])  # fmt: skip
        held = self._collector.request(Hold(), Held)
        produced = held.offsets if held is not None else None
        self._collector.send(Resume(True, fresh.bootstrap, old_read_later=True))
        self.broker, self.bootstrap = fresh, fresh.bootstrap
        targets = produced or {}
        store_reached, *realtime_reached = _in_parallel([
            lambda: store.finish_old_writer(targets, DRAIN_IDLE_S),
            *(lambda child=child: child.request(HandOver(targets), Suspended)
              for child in self._realtime),
        ])  # fmt: skip
        read = produced is not None and store_reached and _all_reached(realtime_reached, targets)
        unread = carry_unread(old.bootstrap, fresh.bootstrap, SAMPLED_TOPIC, SCORER_GROUP)
        if read:
            self._collector.send(OldBrokerRead())
        else:
            log.warning(
                "the readers did not reach %s on the old broker: the collector sends its log "
                "into the fresh one from where they committed", produced,
            )  # fmt: skip
            self._collector.request(Hold(), Held)
            self._collector.send(Resume(True, fresh.bootstrap, broker_lost=True))
        old.stop()
        self.swaps += 1
        self._publish_state()
        self.out(
            f"broker swapped for a fresh one ({before / _MB:.1f} MB -> "
            f"{fresh.rss_bytes() / _MB:.1f} MB resident) on {fresh.bootstrap}; nothing was "
            f"dropped ({unread} samples the scorer had not read were carried over)"
        )
        return True


def _started(start: Callable[[], Any]) -> str | None:
    """Call `start` (it starts a replacement); None once it did, else why not."""
    try:
        start()
    except (RuntimeError, KafkaError) as exc:
        return str(exc)
    return None


def _serving(broker: LocalBroker, start: Callable[[], None]) -> None:
    """`start` `broker` (`start` for a new one, `replace` for one that died: a fresh one
    on a new port), then create pathgrade's topics on it."""
    start()
    ensure_topics(broker.bootstrap)


def _terminal_alerts(log_format: LogFormat) -> str:
    """How this terminal shows alerts, for the banner."""
    if log_format == "json":
        return "one JSON document a line"
    return (
        f"one line each, at most {AlertLineSettings().lines_per_s:g} a second and a count of "
        "the rest (--log-format json: full JSON)"
    )


def _let_go_of_log(spill_dir: Path, sent: int) -> None:
    """Mark the collector's log drained up to `sent`: the store writer and the realtime
    plane read everything the collector sent and committed it, so a restart replays only
    what was never sent (nothing, after a clean stop with the broker up)."""
    log_file = SpillFile(spill_dir)
    try:
        log_file.mark_drained(sent)
    finally:
        log_file.close()


@contextmanager
def _interrupt_after() -> Iterator[None]:
    """Hold back SIGINT until the block is done, then raise KeyboardInterrupt if it came
    (in the main thread, where Python raises it; elsewhere, or where SIGINT is ignored or
    handled otherwise, as in a background job, the block runs as is). Library code that
    wraps the exceptions it sees (pydantic building a model) then never turns Ctrl-C into
    an error."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    interrupted: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: interrupted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if interrupted:
        raise KeyboardInterrupt


def _all_reached(
    answers: list[Suspended | RealtimeStopped | None], targets: dict[int, int]
) -> bool:
    """Whether the realtime processes' answers (the partitions each read up to its target,
    None for one that did not answer) cover every partition of `targets`."""
    if any(answer is None for answer in answers):
        return False
    return set().union(*(answer.reached for answer in answers if answer)) >= targets.keys()


def _counters_of(answer: Counted | None) -> dict[str, Any] | None:
    """The counters a child reported, None when it did not answer."""
    return answer.counters if answer is not None else None


def _in_parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Call each of `calls` in its own thread; their results, in order."""
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        return list(pool.map(lambda call: call(), calls))


def _ignore_kafka_security_settings() -> None:
    """The bundled broker speaks plaintext on loopback: PATHGRADE_KAFKA_* settings (meant
    for a real cluster) are dropped from this process and its children, with a warning."""
    names = sorted(name for name in os.environ if name.startswith(KAFKA_SETTINGS_PREFIX))
    if names:
        log.warning("ignoring %s: the bundled broker is plaintext on loopback", ", ".join(names))
    for name in names:
        del os.environ[name]
