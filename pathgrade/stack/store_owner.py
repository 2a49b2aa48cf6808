"""The single owner of the store: migrations, the store writer, the loopback endpoint other
commands and the stack's other processes go through (for the embedded chDB store it is the
only way in: one process per data directory), and the browser UI on loopback."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate, set_retention
from pathgrade.batch_plane.store.writer import StoreWriter, StoreWriterStats
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.schemas.migrations import Migration
from pathgrade.schemas.stalls import STALLED
from pathgrade.stack.ownership import DataDirLock, read_state, stop_stale_processes
from pathgrade.stack.priority import keep_native_threads_lowered, lower_thread_priority
from pathgrade.stack.startup_pages import page_out_library
from pathgrade.stack.status import summed
from pathgrade.stack.store_endpoint import QueryServer
from pathgrade.transport.message_auth import MessageKey
from pathgrade.web.rendering import UiSettings
from pathgrade.web.server import UiServer
from pathgrade.web.viewers import Viewers

log = logging.getLogger(__name__)

EMBEDDED_ENGINE_LIBRARY = "_chdb"
"""The file name (in part) of chDB's library, whose start-up pages the owner gives back."""

QUIET_ENGINE = {"memory_worker_period_ms": 500}
"""The embedded engine's options for an idle owner: its memory worker (which reads the
process's resident memory for the global limit and purges the allocator's dirty pages)
wakes twice a second, not 20 times (0.15% of a core idle, 2026-12-07); the engine's own
accounting of each allocation against `--store-memory-mb` is unchanged."""

WRITER_IDLE_FETCH_WAIT_MS = 2000
"""How long the broker may hold the store writer's fetch once the topic was quiet for
`transport.consumer.QUIET_BEFORE_IDLE_S` (kafka-python's 500 ms while messages flow): an
idle writer fetches every 2 s, not twice a second, and a held fetch is answered when a
message arrives (`bench/fetch_wait.py --idle`: p50 4 ms, at most 0.5 s for the
first message after a quiet spell; the insert waits `idle_flush_s` after it anyway)."""


class StoreOwner:
    """`claim()` takes the data directory; `start()` (claiming it if not yet) opens and
    migrates the store and starts the writer on `bootstrap`; `stop(targets)` consumes up
    to `targets` (partition -> next offset) before closing; `hand_over_writer(bootstrap)`
    and `finish_old_writer(targets)` move the writer to a fresh broker."""

    def __init__(
        self,
        bootstrap: str,
        data_dir: Path,
        clickhouse: str | None = None,
        writer_niceness: int = 0,
        ui_tokens_file: Path | None = None,
        retention: tuple[int, int] | None = None,
        message_key: MessageKey | None = None,
        engine: dict[str, int] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.message_key = message_key  # the stack's, when its messages are signed
        self.retention = retention  # (content days, row days) to set after migrating
        self.writer_niceness = writer_niceness  # see pathgrade.stack.priority
        self.ui_tokens_file = ui_tokens_file  # the browser UI's viewers (the collector's file)
        self.data_dir = data_dir.resolve()
        self.dsn = clickhouse or embedded_dsn(str(self.data_dir))
        self.engine = engine  # the embedded engine's options (`client.engine_bounds`)
        self.lock = DataDirLock(self.data_dir)
        self._claimed = False
        self.store: ClientStore | None = None
        self.query_server: QueryServer | None = None
        self.ui_server: UiServer | None = None
        self.applied: list[Migration] = []
        self._writer_run: _WriterRun | None = None
        self._old_run: _WriterRun | None = None  # on the broker handed over from
        self._finished_runs: dict[str, int] = {}  # counts of the writers before a swap
        self._closing = threading.Event()

    def claim(self) -> list[str]:
        """Take the data directory (DataDirBusy while another owner runs) and stop the
        processes a crashed owner's `stack.json` lists that still run; returns those."""
        self.lock.acquire()
        self._claimed = True
        leftover = read_state(self.data_dir)
        return stop_stale_processes(leftover) if leftover else []

    def start(self) -> None:
        """Claim the data directory (if not yet), connect, migrate, start consuming and
        serving."""
        if not self._claimed:
            self.claim()
        self.store = open_client_store(self.dsn, {**(self.engine or {}), **QUIET_ENGINE})
        self.applied = migrate(self.store.client)
        if self.retention is not None:
            set_retention(self.store.client, *self.retention)
        self.resume_writer()
        # chDB's merges and pools yield like the writer, including pools grown later
        keep_native_threads_lowered(self.writer_niceness, self._closing)
        self.query_server = QueryServer(self.store)
        self.query_server.start("query")
        query_server = self.query_server
        viewers = Viewers(self.ui_tokens_file)
        self.ui_server = UiServer(
            UiSettings(self.store, viewers, status=lambda: query_server.status)
        )
        self.ui_server.start()
        if self.dsn.startswith("chdb:"):  # its start-up pages, read once (startup_pages)
            page_out_library(EMBEDDED_ENGINE_LIBRARY)

    def resume_writer(self) -> None:
        """Start a store writer (a fresh consumer) on the broker at `bootstrap`."""
        assert self.store is not None
        key = self.message_key and self.message_key.hex
        config = StoreWriterConfig(
            bootstrap_servers=self.bootstrap, message_key=key,
            consumer_options={"idle_fetch_wait_ms": WRITER_IDLE_FETCH_WAIT_MS},
        )  # fmt: skip
        writer = StoreWriter(config, self.store)
        self._writer_run = _WriterRun(writer, self.writer_niceness)

    def suspend_writer(
        self, targets: dict[int, int], idle_s: float = 0.0, timeout_s: float = 180
    ) -> bool:
        """Consume up to `targets` (then on until the topic was quiet for `idle_s`, when
        the broker's data is about to end), insert, commit and close the writer's
        consumer; True when the targets were reached."""
        run, self._writer_run = self._writer_run, None
        return self._finish(run, targets, idle_s, timeout_s)

    def hand_over_writer(self, bootstrap: str, timeout_s: float) -> bool:
        """Start a store writer on the broker at `bootstrap` (a fresh one replacing this
        writer's) beside the current one, which reads on until `finish_old_writer`; True
        once the new one joined its group within `timeout_s`. Both store and commit, each
        on its own broker: nothing waits on the new one's group join."""
        self._old_run = self._writer_run
        self.bootstrap = bootstrap
        self.resume_writer()
        return self.writer_joined(timeout_s)

    def finish_old_writer(
        self, targets: dict[int, int], idle_s: float = 0.0, timeout_s: float = 180
    ) -> bool:
        """`suspend_writer` for the writer on the broker handed over from."""
        run, self._old_run = self._old_run, None
        return self._finish(run, targets, idle_s, timeout_s)

    def _finish(
        self, run: _WriterRun | None, targets: dict[int, int], idle_s: float, timeout_s: float
    ) -> bool:
        """Finish `run` (`_WriterRun.finish`), keeping its counts; True when it reached the
        targets (or there was none)."""
        if run is None:
            return True
        reached = run.finish(targets, idle_s, timeout_s)
        self._finished_runs = summed([self._finished_runs, asdict(run.writer.stats)])
        return reached

    def drop_writer(self) -> None:
        """Stop the store writer at once, storing and committing nothing more: its broker
        died, so what it read and did not commit comes again from the collector's log,
        to the next writer (`resume_writer`). Its thread ends by itself."""
        run, self._writer_run = self._writer_run, None
        if run is not None:
            run.writer.abandoned = True
            run.finish({}, 0.0, timeout_s=0)
            self._finished_runs = summed([self._finished_runs, asdict(run.writer.stats)])

    def writer_joined(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the store writer to join its consumer group; True
        once it has partitions to read."""
        run = self._writer_run
        return run is not None and run.writer.joined.wait(timeout_s)

    def writer_stats(self) -> dict[str, Any]:
        """The store writer's counters since `start()`, across broker swaps (with the one
        still reading the broker handed over from), and what it is stalled on now
        (`schemas.stalls`)."""
        runs = [run for run in (self._writer_run, self._old_run) if run is not None]
        current = [asdict(run.writer.stats) for run in runs] or [asdict(StoreWriterStats())]
        stalled = {what: why for run in runs for what, why in run.writer.stalls.current().items()}
        return {**summed([self._finished_runs, *current]), STALLED: stalled}

    def publish_state(self, state: dict[str, Any]) -> None:
        """Tell other commands where to send queries (and whatever else is useful)."""
        server = self.query_server
        self.lock.publish_state({
            "query_url": server and server.url,
            "token": server and server.token,
            "ui_url": self.ui_server and self.ui_server.url,
            "kafka": self.bootstrap,
            **state,
        })  # fmt: skip

    def stop(
        self, targets: dict[int, int] | None = None, idle_s: float = 0.0, timeout_s: float = 180
    ) -> bool:
        """`suspend_writer`, then close the store and release the directory; True when the
        writer reached `targets`."""
        reached = self.suspend_writer(targets or {}, idle_s, timeout_s)
        self._closing.set()
        if self.ui_server is not None:
            self.ui_server.stop()
        if self.query_server is not None:
            self.query_server.shutdown()
            self.query_server.server_close()
        if self.store is not None:
            self.store.close()
        self.lock.release()
        self._claimed = False
        return reached


class _WriterRun:
    """One store writer polling in its own thread (at `niceness` above the process's)
    until `finish`."""

    def __init__(self, writer: StoreWriter, niceness: int) -> None:
        self.writer = writer
        self.niceness = niceness
        self._stop = threading.Event()
        self._targets: dict[int, int] = {}  # set by `finish` before it sets `_stop`
        self._idle_s = 0.0
        self._reached = False
        self._done = threading.Event()
        threading.Thread(target=self._run, name="store-writer", daemon=True).start()

    def _run(self) -> None:
        lower_thread_priority(self.niceness)
        try:
            self.writer.run(self._stop)
            self._reached = self.writer.drain_to(self._targets, timeout_s=60, idle_s=self._idle_s)
        except Exception as exc:  # what it did not commit is read again by the next writer
            log.warning("the store writer stopped before storing everything it read: %s", exc)
        finally:
            if not self._reached and not self.writer.abandoned:
                log.warning("store writer stopped before reaching offsets %s", self._targets)
            try:
                self.writer.consumer.close()
            except Exception as exc:  # its broker gone, say: nothing is left to do with it
                log.info("closing the store writer's consumer: %s", exc)
            self._done.set()

    def finish(self, targets: dict[int, int], idle_s: float, timeout_s: float) -> bool:
        """Stop polling, consume up to `targets` (and until quiet for `idle_s`), flush,
        commit, close the consumer."""
        self._targets, self._idle_s = targets, idle_s
        self._stop.set()
        self._done.wait(timeout=timeout_s)
        return self._reached
