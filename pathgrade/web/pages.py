"""The UI's routes: each builds one page's template context from the store, for the
request's viewer."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from pathgrade.batch_plane.store import alerts as stored_alerts
from pathgrade.batch_plane.store import traces as stored_traces
from pathgrade.detectors.registry import REGISTRY
from pathgrade.web import alerts_page, edge_page, eval_pages, review
from pathgrade.web.conversation import load_conversation
from pathgrade.web.health import dead_letters, delays, headline, processes, tenant_coverage
from pathgrade.web.next_turn import next_turn
from pathgrade.web.params import BadParameter
from pathgrade.web.rendering import NotFound, NotStoredYet, Ui
from pathgrade.web.trace_list import FACET_TRACES, TraceQuery, list_traces
from pathgrade.web.trace_view import TRACE_ID, load_trace_view

Page = tuple[str, dict[str, Any]]


def routes(ui: Ui) -> list[Route]:
    """Every page's route."""
    built = {
        "/traces": traces,
        "/trace/{trace_id}": trace,
        "/conversation/{conversation_id:path}": conversation,
        "/detectors": detectors,
        "/health": health,
        **alerts_page.PAGES,
        **eval_pages.PAGES,
        **edge_page.PAGES,
        **review.PAGES,
    }
    return [Route(path, ui.page(lambda request, build=build: build(ui, request)))
            for path, build in built.items()]  # fmt: skip


def traces(ui: Ui, request: Request) -> Page:
    query = TraceQuery.from_params(dict(request.query_params), ui.settings.clock_ns())
    page = list_traces(ui.store, request.state.viewer, query, ui.settings.prices)
    return "traces.html", {"query": query, "page": page, "facet_traces": FACET_TRACES}


def trace(ui: Ui, request: Request) -> Page:
    trace_id = request.path_params["trace_id"]
    if not TRACE_ID.fullmatch(trace_id):
        raise BadParameter("trace id", "expected 32 lowercase hex characters")
    tenants = stored_traces.tenants_of(ui.store, request.state.viewer, trace_id)
    asked = request.query_params.get("tenant", "")
    if not tenants and stored_alerts.alerted(ui.store, request.state.viewer, trace_id):
        raise NotStoredYet(
            f"trace {trace_id} has an alert, and its spans are not stored yet: the store "
            "writes what arrived every few seconds, and this page reloads until they are"
        )
    if not tenants or (asked and asked not in tenants):
        raise NotFound(f"no stored span of trace {trace_id}")
    if len(tenants) > 1 and not asked:
        return "choose_tenant.html", {"trace_id": trace_id, "tenants": tenants}
    view = load_trace_view(ui.store, asked or tenants[0], trace_id, ui.settings.prices)
    if view is None:
        raise NotFound(f"no stored span of trace {trace_id}")
    selected = request.query_params.get("span") or (view.rows[0].span.span_id if view.rows else "")
    if selected not in view.details:
        raise BadParameter("span", f"trace {trace_id} has no span {selected!r}")
    return "trace.html", {"view": view, "selected": selected}


def conversation(ui: Ui, request: Request) -> Page:
    conversation_id = request.path_params["conversation_id"]
    turns = load_conversation(ui.store, request.state.viewer, conversation_id)
    if not turns:
        raise NotFound(f"no stored trace of conversation {conversation_id!r}")
    tenant = turns[0].tenant
    own = [turn.trace_id for turn in turns if turn.tenant == tenant]
    advice = next_turn(ui.store, tenant, own, request.query_params.get("run") or None)
    return "conversation.html", {
        "conversation_id": conversation_id,
        "turns": turns,
        "next_turn": advice,
    }


def detectors(ui: Ui, request: Request) -> Page:
    del ui, request
    return "detectors.html", {"rules": [REGISTRY[code] for code in sorted(REGISTRY)]}


def health(ui: Ui, request: Request) -> Page:
    """The pipeline's health. A tenant's viewer sees which stages move and its own
    coverage gaps; the counters (every tenant's traffic) are the operator's view only."""
    tenant = request.state.viewer.tenant
    document, problems = ui.health.status()
    snapshot = document["snapshot"] if document else None
    operator = tenant is None and snapshot is not None
    return "health.html", {
        "document": document,
        "stopped": problems if tenant is None else [headline(p) for p in problems],
        "operator": operator,
        "processes": processes(snapshot) if operator else [],
        "delays": delays(snapshot) if operator else [],
        "dead_letters": dead_letters(snapshot) if operator else [],
        "coverage": tenant_coverage(snapshot, tenant) if snapshot else [],
        "snapshot": snapshot,
    }
