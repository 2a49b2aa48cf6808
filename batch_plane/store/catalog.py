"""What the store's tables are made of, as ClickHouse's system tables say."""

from __future__ import annotations

from pathgrade.schemas.store import ReadableStore


def columns_of(store: ReadableStore, table: str) -> frozenset[str]:
    """The names of the columns `table` has in the store's database (none: no such table)."""
    rows = store.query(
        "SELECT name FROM system.columns "
        "WHERE database = currentDatabase() AND table = {table:String}",
        {"table": table},
    ).rows
    return frozenset(name for (name,) in rows)
