"""The UI's only way to the store: read-only queries, rows as lists, scoped to the tenant
of the request being answered.

Every page reads through the `ReadStore`, which sends each query with ClickHouse's
`readonly` setting (a production UI also connects as a read-only user), so no page can
change the store whatever its SQL. While a tenant's viewer is being answered
(`viewing(tenant)`), every query also carries `additional_table_filters` for every tenant
table (`batch_plane.store.tenancy`): on top of the pages' own tenant conditions, no query
can read another tenant's rows, in any sub-query or view (`batch_plane.store.tenancy`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pathgrade.schemas.store import QueryResult, TenantScopedStore

_TENANT: contextvars.ContextVar[str | None] = contextvars.ContextVar("ui_tenant", default=None)


@contextmanager
def viewing(tenant: str | None) -> Iterator[None]:
    """Queries made inside read only `tenant`'s rows (every tenant's with None)."""
    token = _TENANT.set(tenant)
    try:
        yield
    finally:
        _TENANT.reset(token)


class ReadStore:
    """Read-only, tenant-scoped queries over a `TenantScopedStore` (a `ClientStore`, or
    the store owner's endpoint)."""

    def __init__(self, store: TenantScopedStore) -> None:
        self.store = store

    def query(
        self, sql: str, parameters: dict[str, Any] | None = None, readonly: bool = True
    ) -> QueryResult:
        """Rows of `sql`, read-only whatever `readonly` says (the `Store` signature)."""
        del readonly
        return self.store.query(sql, parameters, readonly=True, tenant=_TENANT.get())

    def rows(self, sql: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        return self.query(sql, parameters).rows

    def dicts(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return self.query(sql, parameters).dicts()

    def value(self, sql: str, parameters: dict[str, Any] | None = None) -> Any:
        """The first column of the first row (None without rows)."""
        rows = self.rows(sql, parameters)
        return rows[0][0] if rows else None
