"""Typed reads of the EDGE runs in `spans`: a run is the `pathgrade.edge.run` span holding
its manifest (`schemas.genai.MANIFEST_SPAN`, `MANIFEST_ATTRIBUTE`) and the traces carrying
its id (`EvalRunId`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.genai import MANIFEST_ATTRIBUTE, MANIFEST_SPAN
from pathgrade.schemas.store import ReadableStore


def manifest_text(store: ReadableStore, run_id: str) -> str:
    """The JSON manifest of EDGE run `run_id` ("" when the store has none)."""
    rows = store.query(
        f"SELECT SpanAttributes['{MANIFEST_ATTRIBUTE}'] FROM spans FINAL "
        "WHERE EvalRunId = {run:String} AND SpanName = {manifest:String} LIMIT 1",
        {"run": run_id, "manifest": MANIFEST_SPAN},
    ).rows
    return rows[0][0] if rows else ""


def listed(store: ReadableStore, viewer: Viewer, limit: int) -> list[dict[str, Any]]:
    """The viewer's latest EDGE runs, newest first: RunId, Tenant, Started, Manifest."""
    return store.query(
        "SELECT EvalRunId AS RunId, Tenant, min(Timestamp) AS Started, "
        f"any(SpanAttributes['{MANIFEST_ATTRIBUTE}']) AS Manifest FROM spans "
        f"WHERE {viewer.where('Tenant')} AND SpanName = {{manifest:String}} "
        f"GROUP BY EvalRunId, Tenant ORDER BY Started DESC LIMIT {int(limit)}",
        {"manifest": MANIFEST_SPAN, **viewer.parameters},
    ).dicts()


def tenant_of(store: ReadableStore, viewer: Viewer, run_id: str) -> str | None:
    """The tenant (of the viewer's) whose EDGE run `run_id` is; None when there is none."""
    rows = store.query(
        f"SELECT Tenant FROM spans WHERE {viewer.where('Tenant')} AND EvalRunId = {{run:String}} "
        "AND SpanName = {manifest:String} LIMIT 1",
        {"run": run_id, "manifest": MANIFEST_SPAN, **viewer.parameters},
    ).rows
    return str(rows[0][0]) if rows else None


def of_traces(store: ReadableStore, tenant: str, trace_ids: Sequence[str]) -> list[str]:
    """The runs (ids) the tenant's traces belong to."""
    rows = store.query(
        "SELECT DISTINCT EvalRunId FROM spans WHERE Tenant = {tenant:String} "
        "AND TraceId IN {ids:Array(String)} AND EvalRunId != ''",
        {"tenant": tenant, "ids": list(trace_ids)},
    ).rows
    return [str(run) for (run,) in rows]


def latest(store: ReadableStore, tenant: str, limit: int) -> list[str]:
    """The tenant's latest EDGE runs (ids), newest first."""
    rows = store.query(
        "SELECT EvalRunId FROM spans WHERE Tenant = {tenant:String} AND SpanName = "
        "{manifest:String} GROUP BY EvalRunId ORDER BY min(Timestamp) DESC "
        f"LIMIT {int(limit)}",
        {"tenant": tenant, "manifest": MANIFEST_SPAN},
    ).rows
    return [str(run) for (run,) in rows]
