"""Typed reads of the `scores` table for the pages: a trace's scores, a scorer's latest
labels (every read with `FINAL`: a score written twice is one row)."""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import Store


def labels_by(store: Store, viewer: Viewer, scorer: str, limit: int) -> list[dict[str, Any]]:
    """The `limit` latest scores of `scorer`, newest first, as column -> value."""
    return store.query(
        "SELECT Tenant, TraceId, Metric, Value, Label, Explanation, Scorer, CreatedAt "
        f"FROM scores FINAL WHERE {viewer.where('Tenant')} AND Scorer = {{scorer:String}} "
        f"ORDER BY CreatedAt DESC LIMIT {int(limit)}",
        {"scorer": scorer, **viewer.parameters},
    ).dicts()


def of_trace(store: Store, tenant: str, trace_id: str) -> list[list[Any]]:
    """The trace's scores by metric, run and repeat: Metric, Value, Label, Explanation,
    Scorer, JudgeModel, RunId, DatasetItemId, Repeat, SpanId."""
    return store.query(
        "SELECT Metric, Value, Label, Explanation, Scorer, JudgeModel, RunId, "
        "DatasetItemId, Repeat, SpanId FROM scores FINAL "
        "WHERE Tenant = {tenant:String} AND TraceId = {trace:String} "
        "ORDER BY Metric, RunId, Repeat",
        {"tenant": tenant, "trace": trace_id},
    ).rows


def latest_of_run(store: Store, run_id: str) -> list[list[Any]]:
    """The latest score of each item, repeat and metric of run `run_id`, in that order:
    DatasetItemId, Repeat, Metric, Value, Slices, Label, Explanation, TraceId."""
    return store.query(
        "SELECT DatasetItemId, Repeat, Metric, argMax(Value, CreatedAt), "
        "argMax(Slices, CreatedAt), argMax(Label, CreatedAt), argMax(Explanation, CreatedAt), "
        "argMax(TraceId, CreatedAt) FROM scores FINAL WHERE RunId = {run:String} "
        "GROUP BY DatasetItemId, Repeat, Metric ORDER BY DatasetItemId, Repeat, Metric",
        {"run": run_id},
    ).rows


def of_two_runs(
    store: Store, viewer: Viewer, candidate: str, baseline: str, metrics: list[str]
) -> list[list[Any]]:
    """The latest score of each item, repeat and metric of `metrics` in the two runs, by
    item and repeat: RunId, DatasetItemId, Repeat, Metric, Value, Slices, TraceId, Tenant."""
    return store.query(
        "SELECT RunId, DatasetItemId, Repeat, Metric, argMax(Value, CreatedAt), "
        "argMax(Slices, CreatedAt), argMax(TraceId, CreatedAt), Tenant FROM scores FINAL "
        f"WHERE {viewer.where('Tenant')} AND RunId IN ({{candidate:String}}, {{baseline:String}}) "
        "AND Metric IN {metrics:Array(String)} "
        "GROUP BY RunId, DatasetItemId, Repeat, Metric, Tenant ORDER BY DatasetItemId, Repeat",
        {"candidate": candidate, "baseline": baseline, "metrics": metrics, **viewer.parameters},
    ).rows
