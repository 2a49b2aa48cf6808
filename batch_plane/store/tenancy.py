"""Reading one tenant's rows whatever the query: ClickHouse's `additional_table_filters`
setting adds `Tenant = '<tenant>'` to every read of every table that has a tenant, in
sub-queries and views too. `ClientStore.query(..., tenant=T)` sends it: the browser UI
with every query of a tenant's viewer (on top of its own conditions), `pathgrade sql` and
`pathgrade alerts` with `--tenant`."""

from __future__ import annotations

from typing import Any

TENANT_TABLES = (
    "spans", "spans_trace_id_ts", "trace_roots", "alerts", "scores", "datasets",
    "dataset_items", "runs", "gates", "gate_rows",
)  # fmt: skip
"""Every table with a Tenant column (migrations 0001-0008)."""
SETTING = "additional_table_filters"


def _quoted(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def tenant_filters(tenant: str) -> str:
    """The `additional_table_filters` value keeping `tenant`'s rows of every tenant table."""
    condition = _quoted(f"Tenant = {_quoted(tenant)}")
    return "{" + ", ".join(f"{_quoted(table)}: {condition}" for table in TENANT_TABLES) + "}"


def tenant_settings(tenant: str | None) -> dict[str, Any]:
    """Query settings keeping `tenant`'s rows ({} for every tenant's)."""
    return {} if tenant is None else {SETTING: tenant_filters(tenant)}
