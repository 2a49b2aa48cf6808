"""The review queue page: traces routed to a human, oldest first, until a reviewer labels
them (`batch_plane.scoring.review`: negative user feedback or a violation alert), with the
`pathgrade review label` command for each, and the latest human labels."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from pathgrade.batch_plane.scoring.review import HUMAN_SCORER, review_queue
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.batch_plane.store import traces
from pathgrade.web.rendering import Ui
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.viewers import Viewer

QUEUE_SHOWN = 200
LABEL_COMMAND = "pathgrade review label {trace} --metric M --value V [--note ...]"


def queue(store: ReadStore, viewer: Viewer) -> list[dict[str, Any]]:
    """The oldest routed traces without a human label, with their roots."""
    items = review_queue(store, limit=QUEUE_SHOWN, tenant=viewer.tenant)
    rows = [
        {"Tenant": i.tenant, "TraceId": i.trace_id, "FirstSeen": i.started_at_ns,
         "Reasons": list(i.reasons), "Service": i.service,
         "Command": LABEL_COMMAND.format(trace=i.trace_id)}
        for i in items
    ]  # fmt: skip
    _add_roots(store, viewer, rows)
    return rows


def labelled(store: ReadStore, viewer: Viewer) -> list[dict[str, Any]]:
    """The latest human scores, newest first."""
    return stored_scores.labels_by(store, viewer, HUMAN_SCORER, QUEUE_SHOWN)


def _add_roots(store: ReadStore, viewer: Viewer, rows: list[dict[str, Any]]) -> None:
    """Each queued trace's root: name, agent, conversation."""
    roots = traces.roots_of(store, viewer, [(r["Tenant"], r["TraceId"]) for r in rows])
    for row in rows:
        row["Root"] = roots.get((row["Tenant"], row["TraceId"]), {})


def review_page(ui: Ui, request: Request) -> tuple[str, dict[str, Any]]:
    viewer: Viewer = request.state.viewer
    return "review.html", {
        "queue": queue(ui.store, viewer),
        "labelled": labelled(ui.store, viewer),
        "command": LABEL_COMMAND.format(trace="TRACE"),
    }


PAGES = {"/review": review_page}
