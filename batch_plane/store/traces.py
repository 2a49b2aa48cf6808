"""Typed reads of the trace tables (`spans`, `trace_roots`) for the pages: one viewer's
rows only."""

from __future__ import annotations

from collections.abc import Sequence

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import Store

SpanKey = tuple[str, str, str]
"""(tenant, trace id, span id)."""


def span_tools(store: Store, viewer: Viewer, keys: Sequence[SpanKey]) -> dict[SpanKey, str]:
    """The tool name of each of the spans (spans of no tool: "")."""
    if not keys:
        return {}
    rows = store.query(
        "SELECT Tenant, TraceId, SpanId, GenAIToolName FROM spans WHERE "
        f"{viewer.where('Tenant')} AND (Tenant, TraceId, SpanId) IN "
        "{keys:Array(Tuple(String, String, String))}",
        {"keys": list(keys), **viewer.parameters},
    ).rows
    return {(tenant, trace, span): tool for tenant, trace, span, tool in rows}


def started_in_range(store: Store, viewer: Viewer, start_ns: int, end_ns: int) -> int:
    """How many traces have a root that started in [start_ns, end_ns)."""
    rows = store.query(
        f"SELECT uniqExact(Tenant, TraceId) FROM trace_roots WHERE {viewer.where('Tenant')} "
        "AND Timestamp >= fromUnixTimestamp64Nano({start:Int64}) "
        "AND Timestamp < fromUnixTimestamp64Nano({end:Int64})",
        {"start": start_ns, "end": end_ns, **viewer.parameters},
    ).rows
    return (rows[0][0] if rows else 0) or 0
