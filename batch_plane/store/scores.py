"""Typed reads of the `scores` table for the pages: a trace's scores, a scorer's latest
labels (every read with `FINAL`: a score written twice is one row)."""

from __future__ import annotations

from typing import Any, NamedTuple

from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas.store import ReadableStore


def labels_by(
    store: ReadableStore, viewer: Viewer, scorer: str, limit: int
) -> list[dict[str, Any]]:
    """The `limit` latest scores of `scorer`, newest first, as column -> value."""
    columns = "Tenant, TraceId, Metric, Value, Label, Explanation, Scorer, CreatedAt"
    return _latest(store, viewer, columns, "Scorer", scorer, "", limit)


class TraceScore(NamedTuple):
    """A score of one trace, as its page shows it."""

    metric: str
    value: float | None
    label: str
    explanation: str
    scorer: str
    judge_model: str
    run_id: str
    item_id: str
    repeat: int
    span_id: str


class RunScore(NamedTuple):
    """The latest score of one item, repeat and metric of a run."""

    item_id: str
    repeat: int
    metric: str
    value: float | None
    slices: dict[str, str]
    label: str
    explanation: str
    trace_id: str


def of_trace(store: ReadableStore, tenant: str, trace_id: str) -> list[TraceScore]:
    """The trace's scores by metric, run and repeat."""
    rows = store.query(
        "SELECT Metric, Value, Label, Explanation, Scorer, JudgeModel, RunId, "
        "DatasetItemId, Repeat, SpanId FROM scores FINAL "
        "WHERE Tenant = {tenant:String} AND TraceId = {trace:String} "
        "ORDER BY Metric, RunId, Repeat",
        {"tenant": tenant, "trace": trace_id},
    ).rows
    return [TraceScore(*row) for row in rows]


def latest_of_run(store: ReadableStore, run_id: str) -> list[RunScore]:
    """The latest score of each item, repeat and metric of run `run_id`, in that order."""
    rows = store.query(
        "SELECT DatasetItemId, Repeat, Metric, argMax(Value, CreatedAt), "
        "argMax(Slices, CreatedAt), argMax(Label, CreatedAt), argMax(Explanation, CreatedAt), "
        "argMax(TraceId, CreatedAt) FROM scores FINAL WHERE RunId = {run:String} "
        "GROUP BY DatasetItemId, Repeat, Metric ORDER BY DatasetItemId, Repeat, Metric",
        {"run": run_id},
    ).rows
    return [RunScore(*row) for row in rows]


def of_two_runs(
    store: ReadableStore, viewer: Viewer, candidate: str, baseline: str, metrics: list[str]
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


def per_metric_of_runs(
    store: ReadableStore, viewer: Viewer, run_ids: list[str]
) -> list[tuple[str, str, int, float | None, int]]:
    """Per run and metric of the runs: (run, metric, scores, sum of values, decided scores)."""
    rows = store.query(
        "SELECT RunId, Metric, count(), sum(Value), count(Value) FROM scores FINAL "
        f"WHERE {viewer.where('Tenant')} AND RunId IN {{runs:Array(String)}} "
        "GROUP BY RunId, Metric",
        {"runs": run_ids, **viewer.parameters},
    ).rows
    return [(run, metric, n, total, decided) for run, metric, n, total, decided in rows]


def metrics_of_runs(store: ReadableStore, viewer: Viewer, run_ids: list[str]) -> list[str]:
    """The metrics scored in any of the runs, in order."""
    rows = store.query(
        f"SELECT DISTINCT Metric FROM scores FINAL WHERE {viewer.where('Tenant')} "
        "AND RunId IN {runs:Array(String)} ORDER BY Metric",
        {"runs": run_ids, **viewer.parameters},
    ).rows
    return [metric for (metric,) in rows]


def of_item(store: ReadableStore, viewer: Viewer, item_id: str, limit: int) -> list[dict[str, Any]]:
    """The `limit` latest scores of dataset item `item_id`, newest first: RunId, Metric,
    Repeat, Value, Label, Explanation, TraceId, CreatedAt."""
    columns = "RunId, Metric, Repeat, Value, Label, Explanation, TraceId, CreatedAt"
    return _latest(
        store, viewer, columns, "DatasetItemId", item_id, ", RunId, Metric, Repeat", limit
    )


def _latest(
    store: ReadableStore,
    viewer: Viewer,
    columns: str,
    key: str,
    value: str,
    then_by: str,
    limit: int,
) -> list[dict[str, Any]]:
    """`columns` of the viewer's `limit` latest scores whose column `key` is `value`, newest
    first (then by `then_by`), as column -> value."""
    return store.query(
        f"SELECT {columns} FROM scores FINAL WHERE {viewer.where('Tenant')} "
        f"AND {key} = {{value:String}} ORDER BY CreatedAt DESC{then_by} LIMIT {int(limit)}",
        {"value": value, **viewer.parameters},
    ).dicts()
