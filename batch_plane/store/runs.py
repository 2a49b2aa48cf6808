"""Typed reads of the `runs` table (one row per evaluation run, read with `FINAL`)."""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import ReadableStore


def exists(store: ReadableStore, run_id: str) -> bool:
    """Whether the `runs` table knows `run_id`."""
    rows = store.query("SELECT count() FROM runs FINAL WHERE RunId = {run:String}", {"run": run_id})
    return bool(rows.rows[0][0])


def agent_and_datasets(store: ReadableStore, run_id: str) -> tuple[str, dict[str, int]] | None:
    """The agent run `run_id` called and the dataset versions it played (name -> version);
    None when the store knows no such run."""
    rows = store.query(
        "SELECT Agent, DatasetVersions FROM runs FINAL WHERE RunId = {run:String}", {"run": run_id}
    ).rows
    return (rows[0][0], rows[0][1]) if rows else None


def listed(store: ReadableStore, viewer: Viewer, suite: str, limit: int) -> list[dict[str, Any]]:
    """The viewer's `limit` latest runs (of `suite`, "": any), newest first: RunId, Suite,
    Agent, StartedAt, FinishedAt, Status, DatasetVersions, Tenant."""
    where, values = of_suite(viewer, suite)
    return store.query(
        "SELECT RunId, Suite, Agent, StartedAt, FinishedAt, Status, DatasetVersions, Tenant "
        f"FROM runs FINAL WHERE {where} ORDER BY StartedAt DESC, RunId LIMIT {int(limit)}",
        values,
    ).dicts()


def of_suite(viewer: Viewer, suite: str) -> tuple[str, dict[str, Any]]:
    """The condition keeping the viewer's rows of `suite` ("": any), and its parameters."""
    where = viewer.where("Tenant") + (" AND Suite = {suite:String}" if suite else "")
    return where, {"suite": suite, **viewer.parameters}
