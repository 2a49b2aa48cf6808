"""Reading one tenant's rows whatever the query: ClickHouse's `additional_table_filters`
setting adds `Tenant = '<tenant>'` to every read of every table that has a tenant, in
sub-queries and views too. `ClientStore.query(..., tenant=T)` sends it: the browser UI
with every query of a tenant's viewer (on top of its own conditions), `pathgrade sql` and
`pathgrade alerts` with `--tenant`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pathgrade.batch_plane.store.cluster_ddl import SHARDING_KEYS, local_name

TENANT_TABLES = (
    "spans", "trace_times", "trace_roots", "span_counts", "alerts", "scores", "datasets",
    "dataset_items", "runs", "gates", "gate_rows", "monitor_rollups", "monitor_ticks", "logs",
    "trace_facets", "conversation_traces", "feedback_spans", "tool_spans", "trace_scores",
    "trace_counts",
)  # fmt: skip
"""Every table with a Tenant column (migrations 0001-0009, 0015's `logs`, 0016, 0018-0020,
0022, 0023's `trace_times`, which replaced 0001's `spans_trace_id_ts`, 0024, 0025)."""
FILTERED_TABLES = TENANT_TABLES + tuple(local_name(t) for t in TENANT_TABLES if t in SHARDING_KEYS)
"""The tables a tenant's reads are filtered on: on a sharded store also the local tables,
which a sub-query reads on each shard (`distributed_product_mode = 'local'`)."""
SETTING = "additional_table_filters"


@dataclass(frozen=True)
class Viewer:
    """Who reads: one tenant, or every tenant (`tenant` None). The browser UI's viewer of a
    page; the store room's typed queries keep to its rows with `where`."""

    tenant: str | None

    def where(self, column: str = "Tenant") -> str:
        """A SQL condition keeping this viewer's rows of `column` (parameter `viewer`)."""
        return "1" if self.tenant is None else f"{column} = {{viewer:String}}"

    @property
    def parameters(self) -> dict[str, Any]:
        """The query parameters `where` refers to."""
        return {} if self.tenant is None else {"viewer": self.tenant}


EVERY_TENANT = Viewer(None)


def _quoted(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tenant_filters(tenant: str) -> str:
    """The `additional_table_filters` value keeping `tenant`'s rows of every tenant table."""
    condition = _quoted(f"Tenant = {_quoted(tenant)}")
    return "{" + ", ".join(f"{_quoted(table)}: {condition}" for table in FILTERED_TABLES) + "}"


def tenant_settings(tenant: str | None) -> dict[str, Any]:
    """Query settings keeping `tenant`'s rows ({} for every tenant's)."""
    return {} if tenant is None else {SETTING: tenant_filters(tenant)}


class TenantStore:
    """A `Store` that is one tenant's: every query reads only its rows (`tenant_settings`),
    and rows inserted into a tenant table without a Tenant column get this tenant. Offline
    commands (datasets, eval, gate) run on it with `--tenant`."""

    def __init__(self, store: Any, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    def query(
        self,
        sql: str,
        parameters: dict[str, Any] | None = None,
        readonly: bool = False,
        tenant: str | None = None,
    ) -> Any:
        del tenant  # always this store's
        return self.store.query(sql, parameters, readonly=readonly, tenant=self.tenant)

    def _with_tenant(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> tuple[list[list[Any]], list[str]]:
        if table not in TENANT_TABLES or "Tenant" in column_names:
            return rows, column_names
        return [[*row, self.tenant] for row in rows], [*column_names, "Tenant"]

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        self.store.insert(table, *self._with_tenant(table, rows, column_names))

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[Any]:
        return self.store.insert_encodable(table, *self._with_tenant(table, rows, column_names))
