"""The UI's only way to the store: read-only queries, rows as lists.

Every page reads through a `ReadStore`, which sends each query with ClickHouse's
`readonly` setting (a production UI also connects as a read-only user), so no page can
change the store whatever its SQL.
"""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.client import QueryResult


class ReadStore:
    """Read-only queries over a store (a `ClientStore` or a `RemoteStore`)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def query(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        return self.store.query(sql, parameters, readonly=True)

    def rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        return self.query(sql, parameters).rows

    def dicts(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.query(sql, parameters).dicts()

    def value(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        """The first column of the first row (None without rows)."""
        rows = self.rows(sql, parameters)
        return rows[0][0] if rows else None
