"""The `Store` protocol: what every layer above may ask of the ClickHouse store, whoever
owns it (the batch plane's client, the embedded stack's store owner), with its result
types; `ReadableStore`, the part a read needs (what the store room's typed reads take, and
what the browser UI's read-only store offers); `TenantScopedStore`, one that can also keep
a query to one tenant's rows. The implementations live in `batch_plane.store` (`client`,
and `remote` through the stack's store owner); this module imports nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class QueryResult:
    """Rows as lists of JSON-ready values, with their column names and ClickHouse types."""

    columns: list[str]
    types: list[str]
    rows: list[list[Any]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


RejectedRow = tuple[list[Any], str]
"""A row the store could not encode, and the store's reason."""


class ReadableStore(Protocol):
    """A store that answers queries: all a typed read needs (every `Store`, and the browser
    UI's `ReadStore`, which reads only)."""

    def query(
        self, sql: str, parameters: dict[str, Any] | None = None, readonly: bool = False
    ) -> QueryResult: ...


class Store(ReadableStore, Protocol):
    """What the planes and batch jobs need of the store, whoever owns it (see
    pathgrade.stack.store_access)."""

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None: ...

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]: ...


class TenantScopedStore(Store, Protocol):
    """A `Store` that can keep a query to one tenant's rows (the client path's tenant
    reader sessions, the store owner's endpoint): what the browser UI reads through."""

    def query(
        self,
        sql: str,
        parameters: dict[str, Any] | None = None,
        readonly: bool = False,
        tenant: str | None = None,
    ) -> QueryResult:
        """Rows of `sql`; with `tenant`, read-only and of that tenant's rows only."""
        ...
