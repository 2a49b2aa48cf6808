"""The review queue: traces routed to a human, oldest first, until a reviewer labels them.

A trace is routed for review by negative user feedback (a span's `pathgrade.feedback`,
as the realtime sampler reads it) or by a flag (a high or critical violation alert). A
reviewer's label is a human score in `scores`, recorded with
`pathgrade review label TRACE --metric M --value V [--note ...]`; a trace with one leaves
the queue and is listed under the labelled traces.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from pathgrade.realtime_plane.sampler import FEEDBACK_ATTRIBUTE, NEGATIVE_FEEDBACK
from pathgrade.web.rendering import Ui
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.viewers import Viewer

QUEUE_SHOWN = 200
HUMAN_SCORES = "(Scorer = 'human' OR startsWith(Scorer, 'human'))"
"""The scores a reviewer's label writes."""
FLAGGING_SEVERITIES = ("high", "critical")
LABEL_COMMAND = "pathgrade review label {trace} --metric M --value V [--note ...]"


def _routed(viewer: Viewer) -> str:
    """SQL: (Tenant, TraceId, first seen, reason) of every routed trace."""
    scope = viewer.where("Tenant")
    feedback = f"SpanAttributes['{FEEDBACK_ATTRIBUTE}']"
    negative = ", ".join(f"'{word}'" for word in sorted(NEGATIVE_FEEDBACK))
    severities = ", ".join(f"'{s}'" for s in FLAGGING_SEVERITIES)
    return (
        f"SELECT Tenant, TraceId, min(Timestamp) AS At, 'negative feedback' AS Reason "
        f"FROM spans WHERE {scope} AND mapContains(SpanAttributes, '{FEEDBACK_ATTRIBUTE}') "
        f"AND (lower({feedback}) IN ({negative}) OR toFloat64OrZero({feedback}) < 0) "
        "GROUP BY Tenant, TraceId "
        "UNION ALL "
        "SELECT Tenant, TraceId, fromUnixTimestamp64Nano(min(TraceStartNs)) AS At, "
        "concat('flagged: ', Code, ' (', Severity, ')') AS Reason FROM alerts FINAL "
        f"WHERE {scope} AND Kind = 'violation' AND Severity IN ({severities}) "
        "GROUP BY Tenant, TraceId, Code, Severity"
    )


def queue(store: ReadStore, viewer: Viewer) -> list[dict[str, Any]]:
    """Routed traces without a human score, oldest first, with why they were routed."""
    rows = store.dicts(
        "SELECT Tenant, TraceId, min(At) AS FirstSeen, groupUniqArray(Reason) AS Reasons "
        f"FROM ({_routed(viewer)}) WHERE (Tenant, TraceId) NOT IN "
        f"(SELECT Tenant, TraceId FROM scores WHERE {viewer.where('Tenant')} AND {HUMAN_SCORES}) "
        f"GROUP BY Tenant, TraceId ORDER BY FirstSeen, TraceId LIMIT {QUEUE_SHOWN}",
        viewer.parameters,
    )
    _add_roots(store, viewer, rows)
    return rows


def labelled(store: ReadStore, viewer: Viewer) -> list[dict[str, Any]]:
    """The latest human scores, newest first."""
    return store.dicts(
        "SELECT Tenant, TraceId, Metric, Value, Label, Explanation, Scorer, CreatedAt "
        f"FROM scores FINAL WHERE {viewer.where('Tenant')} AND {HUMAN_SCORES} "
        f"ORDER BY CreatedAt DESC LIMIT {QUEUE_SHOWN}",
        viewer.parameters,
    )


def _add_roots(store: ReadStore, viewer: Viewer, rows: list[dict[str, Any]]) -> None:
    """Each queued trace's root: name, service, agent, conversation."""
    if not rows:
        return
    roots = {
        (r["Tenant"], r["TraceId"]): r
        for r in store.dicts(
            "SELECT Tenant, TraceId, SpanName, ServiceName, GenAIAgentName, "
            f"GenAIConversationId FROM trace_roots WHERE {viewer.where('Tenant')} AND "
            "(Tenant, TraceId) IN {pairs:Array(Tuple(String, String))} LIMIT 1 BY Tenant, TraceId",
            {"pairs": [(r["Tenant"], r["TraceId"]) for r in rows], **viewer.parameters},
        )
    }
    for row in rows:
        row["Root"] = roots.get((row["Tenant"], row["TraceId"]), {})
        row["Command"] = LABEL_COMMAND.format(trace=row["TraceId"])


def review_page(ui: Ui, request: Request) -> tuple[str, dict[str, Any]]:
    viewer: Viewer = request.state.viewer
    return "review.html", {
        "queue": queue(ui.store, viewer),
        "labelled": labelled(ui.store, viewer),
        "command": LABEL_COMMAND.format(trace="TRACE"),
    }


PAGES = {"/review": review_page}
