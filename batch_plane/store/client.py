"""The one ClickHouse code path: clickhouse-connect to a server or to embedded chDB."""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import clickhouse_connect
from clickhouse_connect.driver.exceptions import DataError

READONLY = {"readonly": 1}


@dataclass
class QueryResult:
    """Rows as lists of JSON-ready values, with their column names and ClickHouse types."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class QueryError(RuntimeError):
    """The query failed; the message is ClickHouse's or the transport's."""


class RowsRejected(QueryError):
    """An insert's rows could not be encoded for their columns (a value outside its column
    type's range): inserting the same rows again cannot succeed."""


RejectedRow = tuple[list[Any], str]
"""A row the store could not encode, and the store's reason."""


class Store(Protocol):
    """What batch jobs need of the store, whoever owns it (see pathgrade.stack.store_access)."""

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult: ...

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None: ...

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]: ...


def insert_halving(
    insert: Callable[[list[list[Any]]], None], rows: list[list[Any]]
) -> list[RejectedRow]:
    """Insert `rows` with `insert`, halving a batch the store rejects (RowsRejected) until
    the rows it cannot encode are found; returns those with the store's reason, so one bad
    row never holds up the others. Other errors propagate (halves already inserted are
    inserted again on a retry, which the idempotent tables absorb)."""
    try:
        insert(rows)
    except RowsRejected as exc:
        if len(rows) == 1:
            return [(rows[0], str(exc))]
        middle = len(rows) // 2
        return insert_halving(insert, rows[:middle]) + insert_halving(insert, rows[middle:])
    return []


class ClientStore:
    """A `Store` over a clickhouse-connect client (server or chDB), optionally serialised
    with other users of the same client by `lock`."""

    def __init__(self, client: Any, lock: threading.Lock | None = None) -> None:
        self.client = client
        self.lock = lock or threading.Lock()

    def query(
        self, sql: str, parameters: dict[str, Any] | None = None, readonly: bool = False
    ) -> QueryResult:
        try:
            with self.lock:
                result = self.client.query(
                    sql, parameters=parameters, settings=READONLY if readonly else None
                )
        except Exception as exc:  # clickhouse-connect and chDB raise several types
            raise QueryError(str(exc).strip()) from exc
        return QueryResult(
            list(result.column_names),
            [t.name for t in result.column_types],
            [[json_ready(v) for v in row] for row in result.result_rows],
        )

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        if not rows:
            return
        try:
            with self.lock:
                self.client.insert(table, rows, column_names=column_names)
        except DataError as exc:
            raise RowsRejected(f"insert into {table} failed: {str(exc).strip()}") from exc
        except Exception as exc:
            raise QueryError(f"insert into {table} failed: {str(exc).strip()}") from exc

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]:
        """Insert the rows the store can encode (`insert_halving`); returns the others."""
        return insert_halving(lambda part: self.insert(table, part, column_names), rows)


def json_ready(value: Any) -> Any:
    """A JSON-ready form of one ClickHouse value."""
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(
        value, decimal.Decimal | uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address
    ):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


class StoreUnavailable(RuntimeError):
    """ClickHouse could not be reached or opened."""


def embedded_dsn(data_dir: str) -> str:
    """The chDB DSN of the embedded store kept in `data_dir`."""
    return f"chdb://{data_dir}/clickhouse"


def connect(dsn: str) -> Any:
    """A clickhouse-connect client for `dsn`: `chdb:///path`, `http(s)://...` or
    `clickhouse://user:password@host:port/database`."""
    try:
        client = clickhouse_connect.get_client(dsn=dsn)
        client.query("SELECT 1")
    except Exception as exc:  # the driver raises several unrelated types
        raise StoreUnavailable(f"cannot reach ClickHouse at {redact_dsn(dsn)}: {exc}") from exc
    return client


def redact_dsn(dsn: str) -> str:
    """`dsn` with any password replaced, fit for an error message."""
    scheme, sep, rest = dsn.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return dsn
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
