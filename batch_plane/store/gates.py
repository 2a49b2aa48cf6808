"""Typed reads of the `gates` table (one row per recorded release gate, read with
`FINAL`): the list `pathgrade gate list` prints, a gate's verdict and runs."""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.runs import of_suite
from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import QueryResult, ReadableStore

LISTED_COLUMNS = (
    "GateId, DecidedAt, Suite, CandidateRun, BaselineRun, "
    "if(Passed, 'PASS', 'FAIL') AS Verdict, FailedRows, TotalRows, Seed"
)


def list_gates(store: ReadableStore, suite: str | None = None, limit: int = 20) -> QueryResult:
    """Recorded gates, newest first; only those of `suite` when given."""
    where = "WHERE Suite = {suite:String}" if suite else ""
    return store.query(
        f"SELECT {LISTED_COLUMNS} FROM gates FINAL {where} "
        f"ORDER BY DecidedAt DESC, GateId LIMIT {int(limit)}",
        {"suite": suite} if suite else None,
    )


def verdict_json(store: ReadableStore, gate_id: str) -> str | None:
    """The recorded verdict (JSON) of `gate_id`; None when none is recorded."""
    rows = store.query(
        "SELECT Verdict FROM gates FINAL WHERE GateId = {gate:String}", {"gate": gate_id}
    ).rows
    return rows[0][0] if rows else None


def recorded(
    store: ReadableStore, viewer: Viewer, gate_id: str
) -> tuple[str, str, str, Any] | None:
    """(verdict JSON, candidate run, baseline run, decided at) of the viewer's gate
    `gate_id`; None when the viewer has no such gate."""
    rows = store.query(
        "SELECT Verdict, CandidateRun, BaselineRun, DecidedAt FROM gates FINAL "
        f"WHERE {viewer.where('Tenant')} AND GateId = {{gate:String}}",
        {"gate": gate_id, **viewer.parameters},
    ).rows
    return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None


def listed(store: ReadableStore, viewer: Viewer, suite: str, limit: int) -> list[dict[str, Any]]:
    """The viewer's `limit` latest gates (of `suite`, "": any), newest first: GateId,
    DecidedAt, Suite, CandidateRun, BaselineRun, Passed, FailedRows, TotalRows, Tenant."""
    where, values = of_suite(viewer, suite)
    return store.query(
        "SELECT GateId, DecidedAt, Suite, CandidateRun, BaselineRun, Passed, FailedRows, "
        f"TotalRows, Tenant FROM gates FINAL WHERE {where} "
        f"ORDER BY DecidedAt DESC, GateId LIMIT {int(limit)}",
        values,
    ).dicts()
