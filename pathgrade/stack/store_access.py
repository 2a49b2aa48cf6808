"""How a command reaches the store: a ClickHouse server directly, the embedded store
directly when no stack owns it, or through the running stack that owns it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathgrade.batch_plane.store.errors import QueryError, RowsRejected
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.remote import RemoteStore
from pathgrade.content.fingerprints import KEY_FILE_NAME
from pathgrade.schemas.store import Store
from pathgrade.stack.ownership import DataDirLock, read_state

if TYPE_CHECKING:
    from pathgrade.batch_plane.store.client import ClientStore


def facts_key_file(data_dir: Path) -> Path:
    """Where `pathgrade up` keeps the deployment's fact secret in its data directory (the
    collector fingerprints with it; offline scoring compares expected arguments with it)."""
    return data_dir / KEY_FILE_NAME


class NoStore(RuntimeError):
    """There is no store to open (nothing at the data dir, or its owner is starting)."""


@contextmanager
def open_store(
    data_dir: Path, clickhouse: str | None = None, must_exist: bool = True
) -> Iterator[Store]:
    """The store for a command, migrated, released on exit."""
    if clickhouse:
        with _migrated(clickhouse) as store:
            yield store
        return
    data_dir = data_dir.resolve()
    lock = DataDirLock(data_dir)
    if lock.try_acquire():
        try:
            if must_exist and not (data_dir / "clickhouse").exists():
                raise NoStore(
                    f"no store in {data_dir}: start one with `pathgrade up --data-dir {data_dir}`"
                )
            from pathgrade.batch_plane.store.client import embedded_dsn

            with _migrated(embedded_dsn(str(data_dir))) as store:
                yield store
        finally:
            lock.release()
        return
    state = read_state(data_dir)
    if not state or not state.get("query_url"):
        raise NoStore(f"{data_dir} is owned by a running stack that is still starting; try again")
    yield OwnersStore(data_dir, state["query_url"], state.get("token") or "")


class OwnersStore(RemoteStore):
    """The store of whichever process owns `data_dir`, through its endpoint: a request the
    owner does not answer (or refuses the token of) is sent once more to the address and
    token `stack.json` names now, so a long-running command (`pathgrade realtime
    --data-dir` next to a `store-writer`) follows an owner that was restarted."""

    def __init__(self, data_dir: Path, url: str, token: str) -> None:
        super().__init__(url, token)
        self.data_dir = data_dir

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return super()._post(path, body)
        except RowsRejected:
            raise
        except QueryError:
            if not self._follow_owner():
                raise
            return super()._post(path, body)

    def _follow_owner(self) -> bool:
        """Take the owner's address and token from `stack.json`; False when unchanged."""
        state = read_state(self.data_dir) or {}
        url, token = (state.get("query_url") or "").rstrip("/"), state.get("token") or ""
        if not url or (url, token) == (self.url, self.token):
            return False
        self.url, self.token = url, token
        return True


@contextmanager
def _migrated(dsn: str) -> Iterator[ClientStore]:
    """The store at `dsn`, migrated, closed on exit (the engine's client loaded here, not
    for a command that reaches a running stack's endpoint)."""
    from pathgrade.batch_plane.store.client import open_client_store

    store = open_client_store(dsn)
    try:
        migrate(store.client)
        yield store
    finally:
        store.close()


class StatusUnavailable(RuntimeError):
    """No running stack answered with its status."""


def stack_status(data_dir: Path, timeout_s: float = 10.0) -> dict[str, Any]:
    """The status document (`pathgrade.stack.status`) of the stack running on `data_dir`,
    asked with the owner's token from its `stack.json`."""
    state = read_state(data_dir)
    if not state or not state.get("query_url"):
        raise StatusUnavailable(
            f"no running `pathgrade up` in {data_dir} (no stack.json with its query address)"
        )
    owner = RemoteStore(state["query_url"], state.get("token") or "", timeout_s)
    try:
        return json.loads(owner.get("/status"))
    except QueryError as exc:
        raise StatusUnavailable(f"the stack of {data_dir}: {exc} (is it running?)") from exc
