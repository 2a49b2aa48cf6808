"""Runs, gates and datasets pages: gate history, one gate, two runs side by side per item,
datasets with their versions and items, and one item with its source trace and its scores
across runs."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from starlette.requests import Request

from pathgrade.batch_plane.scoring.layers import by_layer, layer_of
from pathgrade.batch_plane.store import datasets as stored_datasets
from pathgrade.batch_plane.store import gates as stored_gates
from pathgrade.batch_plane.store import runs as stored_runs
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.schemas.layers import OTHER
from pathgrade.web import params as p
from pathgrade.web.gate_page import recorded_gate_view, run_evidence
from pathgrade.web.rendering import NotFound, Ui
from pathgrade.web.viewers import Viewer

Page = tuple[str, dict[str, Any]]
LISTED = 200


def runs(ui: Ui, request: Request) -> Page:
    viewer: Viewer = request.state.viewer
    suite = p.text(dict(request.query_params), "suite")
    gate_rows = stored_gates.listed(ui.store, viewer, suite, LISTED)
    run_rows = stored_runs.listed(ui.store, viewer, suite, LISTED)
    per_metric = stored_scores.per_metric_of_runs(ui.store, viewer, [r["RunId"] for r in run_rows])
    for row in run_rows:
        mine = [m for m in per_metric if m[0] == row["RunId"]]
        row["Scores"] = sum(m[2] for m in mine)
        row["Layers"] = _layer_means(mine)
    return "runs.html", {"gates": gate_rows, "runs": run_rows, "suite": suite}


def _layer_means(per_metric: list[tuple]) -> list[tuple[str, float | None]]:
    """Per layer (`schemas.layers`, in report order), the mean of the decided scores of
    (run, metric, count, sum, decided) rows; metrics of no layer (efficiency: tokens,
    cost) are left out, their values being no score in [0, 1]."""
    means = []
    for layer, group in by_layer(per_metric, lambda row: layer_of(row[1])):
        decided = sum(row[4] for row in group)
        total = sum(row[3] or 0.0 for row in group)
        if layer != OTHER:
            means.append((layer, total / decided if decided else None))
    return means


def gate(ui: Ui, request: Request) -> Page:
    gate_id = request.path_params["gate_id"]
    view = recorded_gate_view(ui.store, request.state.viewer, gate_id)
    if view is None:
        raise NotFound(f"gate {gate_id!r}: not in the store")
    return "gate.html", {"view": view}


def compare(ui: Ui, request: Request) -> Page:
    """Two runs side by side: per item and metric, each run's scores and their delta; the
    metrics grouped by the layer they grade."""
    viewer: Viewer = request.state.viewer
    values = dict(request.query_params)
    candidate, baseline = p.text(values, "candidate"), p.text(values, "baseline")
    if not candidate or not baseline:
        raise p.BadParameter("candidate", "give two runs: ?candidate=RUN&baseline=RUN")
    metrics = stored_scores.metrics_of_runs(ui.store, viewer, [candidate, baseline])
    if not metrics:
        raise NotFound(f"no scores of run {candidate!r} or run {baseline!r}")
    evidence = run_evidence(ui.store, viewer, candidate, baseline, metrics)
    items = sorted({item for per_item in evidence.values() for item in per_item})
    layers = by_layer(metrics, layer_of)
    return "compare.html", {
        "candidate": candidate,
        "baseline": baseline,
        "layers": layers,
        "metrics": [metric for _, group in layers for metric in group],
        "items": items,
        "evidence": evidence,
    }


def datasets(ui: Ui, request: Request) -> Page:
    viewer: Viewer = request.state.viewer
    versions = stored_datasets.listed(ui.store, viewer, LISTED * 5)
    counts = stored_datasets.item_counts(ui.store, viewer)
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in versions:
        row["Items"] = counts.get((row["Tenant"], row["Name"], row["Version"]), 0)
        grouped[row["Name"]].append(row)
    return "datasets.html", {"datasets": dict(grouped)}


def dataset(ui: Ui, request: Request) -> Page:
    viewer: Viewer = request.state.viewer
    values = dict(request.query_params)
    name = p.text(values, "name")
    version = p.number(values, "version")
    if not name or version is None:
        raise p.BadParameter("name", "give a dataset: ?name=NAME&version=N")
    info = stored_datasets.version_shown(ui.store, viewer, name, int(version))
    if info is None:
        raise NotFound(f"dataset {name}@{int(version)}: not in the store")
    items = stored_datasets.items_shown(ui.store, viewer, name, int(version), LISTED * 5)
    for item in items:
        item["user"] = _user_text(item["Input"])
        item["tools"] = [c.get("name", "?") for c in _json_list(item["ExpectedToolCalls"])]
    return "dataset.html", {"info": info, "items": items}


def dataset_item(ui: Ui, request: Request) -> Page:
    """One item: where it is (datasets and versions), its source trace, and its scores
    across runs (each linked to the trace scored)."""
    viewer: Viewer = request.state.viewer
    item_id = request.path_params["item_id"]
    places = stored_datasets.places_of_item(ui.store, viewer, item_id)
    scores = stored_scores.of_item(ui.store, viewer, item_id, LISTED * 5)
    if not places and not scores:
        raise NotFound(f"dataset item {item_id!r}: not in the store")
    by_run: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in scores:
        by_run[row["RunId"]][row["Metric"]].append(row)
    return "dataset_item.html", {
        "item_id": item_id,
        "places": places,
        "runs": {run: dict(metrics) for run, metrics in by_run.items()},
        "metrics": sorted({row["Metric"] for row in scores}),
    }


def _json_list(text: str) -> list[dict[str, Any]]:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _user_text(text: str) -> str:
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return text
    return str(value.get("user", "")) if isinstance(value, dict) else str(value)


PAGES = {
    "/runs": runs,
    "/gates/{gate_id}": gate,
    "/compare": compare,
    "/datasets": datasets,
    "/dataset": dataset,
    "/dataset-item/{item_id:path}": dataset_item,
}
