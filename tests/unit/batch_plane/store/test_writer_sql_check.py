"""Whether the store writer takes the SQL insert path: the store's ClickHouse must know the
insert's settings and let the writer create the insert's input table."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.otlp_insert import SERVER_SETTINGS, input_table_ddl
from pathgrade.batch_plane.store.writer import _sql_insert_runs


class _Server:
    """Stands for a server's clickhouse-connect client: knows `settings`, records the
    statements it runs, and refuses to create tables unless `may_create`."""

    def __init__(self, settings: tuple[str, ...], may_create: bool) -> None:
        self.settings = settings
        self.may_create = may_create
        self.commands: list[str] = []

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        string = SimpleNamespace(name="String")
        return SimpleNamespace(
            column_names=["name"], column_types=[string], result_rows=[[s] for s in self.settings]
        )

    def command(self, cmd: str) -> None:
        self.commands.append(cmd)
        if not self.may_create:
            raise RuntimeError("Code: 497. DB::Exception: pathgrade_writer: Not enough "
                               "privileges. To execute this query, it's necessary to have "
                               "the grant CREATE TABLE ON default.*. (ACCESS_DENIED)")  # fmt: skip


def test_a_store_that_lets_the_writer_create_the_input_table_takes_the_sql_path() -> None:
    server = _Server(SERVER_SETTINGS, may_create=True)
    assert _sql_insert_runs(ClientStore(server, server))
    assert server.commands == input_table_ddl()


def test_a_writer_allowed_to_insert_but_not_to_create_tables_takes_the_python_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = _Server(SERVER_SETTINGS, may_create=False)
    assert not _sql_insert_runs(ClientStore(server, server))
    assert "cannot create the SQL insert's input table" in caplog.text
    assert "Not enough privileges" in caplog.text


def test_a_store_without_the_settings_takes_the_python_path_and_creates_nothing() -> None:
    server = _Server(SERVER_SETTINGS[:1], may_create=True)
    assert not _sql_insert_runs(ClientStore(server, server))
    assert server.commands == []
