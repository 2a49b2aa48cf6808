"""The single owner of the store: migrations, the store writer, and the loopback
endpoint other commands and the stack's other processes go through (for the embedded
chDB store it is the only way in: one process per data directory)."""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any

from batch_plane.store import ClientStore, connect, embedded_dsn
from batch_plane.store_writer import StoreWriter, StoreWriterConfig
from pathgrade.ownership import DataDirLock
from pathgrade.query import QueryServer
from schemas.migrations import Migration, migrate

log = logging.getLogger(__name__)


class StoreOwner:
    """`start()` opens and migrates the store and starts the writer; `stop(targets)`
    consumes up to `targets` (partition -> next offset) before closing."""

    def __init__(self, bootstrap: str, data_dir: Path, clickhouse: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.data_dir = data_dir.resolve()
        self.dsn = clickhouse or embedded_dsn(str(self.data_dir))
        self.lock = DataDirLock(self.data_dir)
        self.client: Any = None
        self.store: ClientStore | None = None
        self.writer: StoreWriter | None = None
        self.query_server: QueryServer | None = None
        self.applied: list[Migration] = []
        self._client_lock = threading.Lock()
        self._stop = threading.Event()
        self._targets: queue.Queue[dict[int, int]] = queue.Queue()
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Take the data directory, connect, migrate, start consuming and serving."""
        self.lock.acquire()
        self.client = connect(self.dsn)
        self.applied = migrate(self.client)
        self.store = ClientStore(self.client, self._client_lock)
        self.writer = StoreWriter(StoreWriterConfig(self.bootstrap), self.store)
        self._spawn("store-writer", self._run_writer)
        self.query_server = QueryServer(self.store)
        self._spawn("query", self.query_server.serve_forever)

    def _spawn(self, name: str, target: Any) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _run_writer(self) -> None:
        assert self.writer is not None
        try:
            self.writer.run(self._stop)
            try:
                targets = self._targets.get(timeout=120)
            except queue.Empty:
                targets = {}
            if not self.writer.drain_to(targets, timeout_s=60):
                log.warning("store writer stopped before reaching offsets %s", targets)
            self.writer.close()
        finally:
            self._done.set()

    def publish_state(self, state: dict[str, Any]) -> None:
        """Tell other commands where to send queries (and whatever else is useful)."""
        url = self.query_server.url if self.query_server else None
        self.lock.publish_state({"query_url": url, "kafka": self.bootstrap, **state})

    def stop(self, targets: dict[int, int] | None = None, timeout_s: float = 180) -> None:
        """Consume up to `targets`, flush, commit, close, release the directory."""
        self._stop.set()
        if self.writer is not None:
            self._targets.put(targets or {})
            self._done.wait(timeout=timeout_s)
        if self.query_server is not None:
            self.query_server.shutdown()
            self.query_server.server_close()
        if self.client is not None:
            with self._client_lock:
                self.client.close()
        self.lock.release()
