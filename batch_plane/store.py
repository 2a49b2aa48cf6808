"""The one ClickHouse code path: clickhouse-connect to a server or to embedded chDB."""

from __future__ import annotations

from typing import Any

import clickhouse_connect


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
