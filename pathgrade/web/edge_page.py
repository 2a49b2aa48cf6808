"""EDGE pages: the EDGE runs in the store, one run's determinism table with its agent graph
drawn by node and edge utility and its agents' hand-offs (transfers and sub-agent calls)
marked on it (hover a node or edge for its counts, click a node for the conversations
through it), and the conversations through one node."""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from urllib.parse import quote

from starlette.requests import Request

from pathgrade.batch_plane.edge.report import graph_svg
from pathgrade.batch_plane.edge.store import EdgeRunNotFound, load_turns, run_metrics
from pathgrade.batch_plane.store import edge_runs as edge_runs_store
from pathgrade.content.graph_documents import load_graph
from pathgrade.web.rendering import NotFound, Ui
from pathgrade.web.store_reads import viewing
from pathgrade.web.viewers import Viewer

Page = tuple[str, dict[str, Any]]
RUNS_SHOWN = 200


def edge_runs(ui: Ui, request: Request) -> Page:
    viewer: Viewer = request.state.viewer
    return "edge_runs.html", {"runs": edge_runs_store.listed(ui.store, viewer, RUNS_SHOWN)}


def _tenant_of_run(ui: Ui, viewer: Viewer, run_id: str) -> str:
    """The tenant whose EDGE run `run_id` is (NotFound when the viewer has none)."""
    tenant = edge_runs_store.tenant_of(ui.store, viewer, run_id)
    if tenant is None:
        raise NotFound(f"EDGE run {run_id!r}: no manifest span in the store")
    return tenant


def edge_run(ui: Ui, request: Request) -> Page:
    run_id = request.path_params["run_id"]
    tenant = _tenant_of_run(ui, request.state.viewer, run_id)
    try:
        with viewing(tenant):  # the run's tenant only, also for a loopback viewer
            metrics = run_metrics(ui.store, run_id)
    except EdgeRunNotFound as exc:
        raise NotFound(str(exc)) from exc
    graph = load_graph(metrics["graph"])
    svg = graph_svg(
        graph,
        metrics["utility"],
        node_href=lambda node: f"/edge/{quote(run_id)}/node/{quote(node)}",
        handoffs=metrics["handoffs"],
    )
    return "edge_run.html", {"run_id": run_id, "metrics": metrics, "svg": svg}


def edge_node(ui: Ui, request: Request) -> Page:
    run_id, node = request.path_params["run_id"], request.path_params["node"]
    tenant = _tenant_of_run(ui, request.state.viewer, run_id)
    with viewing(tenant):
        turns = [t for t in load_turns(ui.store, run_id) if node in t.nodes]
    if not turns:
        raise NotFound(f"EDGE run {run_id!r}: no conversation went through node {node!r}")
    conversations: dict[tuple[str, str, int | None], list[Any]] = defaultdict(list)
    for turn in turns:
        conversations[turn.conversation].append(turn)
    return "edge_node.html", {
        "run_id": run_id,
        "node": node,
        "tenant": tenant,
        "conversations": dict(conversations),
    }


PAGES = {
    "/edge": edge_runs,
    "/edge/{run_id}": edge_run,
    "/edge/{run_id}/node/{node:path}": edge_node,
}
