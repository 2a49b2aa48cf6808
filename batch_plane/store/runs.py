"""Typed reads of the `runs` table (one row per evaluation run, read with `FINAL`)."""

from __future__ import annotations

from pathgrade.schemas.store import Store


def exists(store: Store, run_id: str) -> bool:
    """Whether the `runs` table knows `run_id`."""
    rows = store.query("SELECT count() FROM runs FINAL WHERE RunId = {run:String}", {"run": run_id})
    return bool(rows.rows[0][0])


def agent_and_datasets(store: Store, run_id: str) -> tuple[str, dict[str, int]] | None:
    """The agent run `run_id` called and the dataset versions it played (name -> version);
    None when the store knows no such run."""
    rows = store.query(
        "SELECT Agent, DatasetVersions FROM runs FINAL WHERE RunId = {run:String}", {"run": run_id}
    ).rows
    return (rows[0][0], rows[0][1]) if rows else None
