"""Test helpers: the OpenAI stand-in, a module-scoped embedded store fixture, and a
loopback TCP server base.

chDB allows one embedded store path per process at a time, so each test module opens its
store for its own duration and closes it: import `store_fixture` into the test module,
then ask for `store`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.schemas.migrations import CONTENT_COLUMNS, SPAN_DERIVED_TTL


def keep_forever(client: Any) -> None:
    """Remove the spans' retention and that of the rows derived from them: test fixtures
    stamp spans with fixed times long past, which the store would otherwise drop at its
    next merge (retention is tested by tests/unit/batch_plane/store/test_retention.py)."""
    for column in CONTENT_COLUMNS:
        client.command(f"ALTER TABLE spans MODIFY COLUMN {column} REMOVE TTL")
    client.command("ALTER TABLE spans REMOVE TTL")
    for table in ("trace_times", "trace_counts", *SPAN_DERIVED_TTL):
        client.command(f"ALTER TABLE {table} REMOVE TTL")


@pytest.fixture(scope="module", name="store")
def store_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """A migrated embedded chDB store of the test module's own, closed after it."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("store"))))
    migrate(store.client)
    keep_forever(store.client)
    yield store
    store.close()


class LoopbackServer:
    """A TCP listener on a free loopback port serving each accepted connection on its own
    thread: subclasses define `serve(connection, number)` (connections numbered from 1)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            args = (connection, self.connections)
            threading.Thread(target=self.serve, args=args, daemon=True).start()

    def serve(self, connection: socket.socket, number: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()
