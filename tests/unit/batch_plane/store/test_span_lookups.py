"""The tables views fill from `spans` for the conversation page, the review queue and the
alerts page's tools (migrations 0019 `conversation_traces`, 0020 `feedback_spans`, 0022
`tool_spans`): the pages answer from them what they answered from the spans, for spans
stored before the migrations (their backfill) and after (their views), replays and other
tenants included."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from pathgrade.batch_plane.store import alerts, conversations, review, traces
from pathgrade.batch_plane.store.alerts import AlertFilters
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas import genai
from pathgrade.schemas.migrations import bundled_migrations
from pathgrade.schemas.model import GenAIFields, Span

DAY_NS = 86_400 * 10**9
NOW_NS = time.time_ns()


def span(
    tenant: str, trace: str, number: int, days_ago: float, conversation: str = "",
    feedback: str = "", root: bool = False, tool: str = "",
) -> Span:  # fmt: skip
    """Span `number` of `trace`, started `days_ago`, of `conversation`, with `feedback`, a
    call of `tool` if given (else a chat)."""
    start = NOW_NS - int(days_ago * DAY_NS)
    return Span(
        tenant, trace, f"{number:016x}", "" if root else f"{0:016x}", f"step {number}",
        "Internal", start, start + 1000, service_name=f"svc-{tenant}",
        attributes={genai.PG_FEEDBACK: feedback} if feedback else {},
        genai=GenAIFields(operation="execute_tool" if tool else "chat", tool_name=tool,
                          conversation_id=conversation),
        received_at_ns=start,
    )  # fmt: skip


def conversation_spans(trace: str, tenant: str, days_ago: float) -> list[Span]:
    """A trace of conversation c1 whose root has no conversation id (only its second span
    has), its third span on a later day: every span of it belongs to the conversation."""
    return [
        span(tenant, trace, 0, days_ago, root=True),
        span(tenant, trace, 1, days_ago, conversation="c1"),
        span(tenant, trace, 2, days_ago - 1.5),
    ]


def store_spans(store: ClientStore, spans: list[Span]) -> None:
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))


A, B, C, D, E, F = (letter * 32 for letter in "abcdef")
TOOLED = {("a", "1" * 32): "lookup_order", ("a", "2" * 32): "issue_refund",
          ("b", "3" * 32): "issue_refund"}  # fmt: skip
"""(tenant, trace) -> the tool of its span 1, which an alert is pinned to."""


def tool_spans(tenant: str, trace: str) -> list[Span]:
    return [span(tenant, trace, 0, 3, root=True),
            span(tenant, trace, 1, 3, tool=TOOLED[(tenant, trace)])]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """Spans stored before migrations 0019-0020 (backfilled) and after (their views)."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("lookups"))))
    migrate(store.client, [m for m in bundled_migrations() if m.version < 19])
    store_spans(store, conversation_spans(A, "a", 5))
    store_spans(store, [span("a", C, 0, 4, feedback="thumbs_down", root=True)])
    store_spans(store, tool_spans("a", "1" * 32))
    migrate(store.client)
    store_spans(store, tool_spans("a", "2" * 32) + tool_spans("b", "3" * 32))
    store_spans(store, conversation_spans(B, "a", 2))
    replayed = [replace(s, name=f"{s.name} again", received_at_ns=s.received_at_ns + 1)
                for s in conversation_spans(B, "a", 2)]  # fmt: skip
    store_spans(store, replayed)  # a replay, received later: its rows are the latest
    store_spans(store, conversation_spans(D, "b", 3))  # another tenant's
    store_spans(store, [span("a", E, 0, 1, conversation="c2", root=True)])
    store_spans(store, [span("b", F, 0, 1, feedback="-1", root=True),
                        span("b", F, 1, 1, feedback="good")])  # fmt: skip
    store_spans(store, [span("a", "9" * 32, 0, 1, feedback="positive", root=True)])
    store.insert(
        "alerts",
        [[f"k-{trace[0]}", tenant, "PG110", "high", "r", trace, "violation"]
         for tenant, trace in (("a", A), ("b", D), ("a", E))],
        ["AlertKey", "Tenant", "Code", "Severity", "Reason", "TraceId", "Kind"],
    )  # fmt: skip
    pinned = [(tenant, trace, f"{n:016x}") for tenant, trace in TOOLED for n in (0, 1)]
    store.insert(
        "alerts",
        [[f"p-{trace}-{span_id}", tenant, "PG105", "cannot_decide", trace, span_id,
          NOW_NS - 4 * DAY_NS, NOW_NS - 2 * DAY_NS, NOW_NS - 2 * DAY_NS]
         for tenant, trace, span_id in pinned],
        ["AlertKey", "Tenant", "Code", "Kind", "TraceId", "SpanId", "TraceStartNs",
         "TraceEndNs", "DetectedAtNs"],
    )  # fmt: skip
    yield store
    store.close()


def test_a_conversation_holds_every_span_of_each_trace_with_a_span_of_it(
    store: ClientStore,
) -> None:
    every = [
        (s.tenant, s.trace_id, s.name) for s in conversations.spans(store, Viewer(None), "c1", 100)
    ]
    assert every == [
        ("a", A, "step 0"), ("a", A, "step 1"), ("a", A, "step 2"), ("b", D, "step 0"),
        ("b", D, "step 1"), ("a", B, "step 0 again"), ("a", B, "step 1 again"),
        ("b", D, "step 2"), ("a", B, "step 2 again"),
    ]  # fmt: skip
    own = conversations.spans(store, Viewer("a"), "c1", 4)
    assert [(s.trace_id, s.name) for s in own] == [
        (A, "step 0"), (A, "step 1"), (A, "step 2"), (B, "step 0 again"),
    ]  # fmt: skip
    assert conversations.spans(store, Viewer("a"), "c3", 100) == []
    alerts = conversations.alerts(store, Viewer(None), "c1")
    assert [(tenant, trace) for tenant, trace, *_ in alerts] == [("a", A), ("b", D)]
    assert [trace for _, trace, *_ in conversations.alerts(store, Viewer("b"), "c1")] == [D]


def test_the_review_queue_routes_negative_feedback_stored_before_and_after_the_migration(
    store: ClientStore,
) -> None:
    queued = review.queue(store)
    assert [(t, trace, service, negative) for t, trace, _, service, negative, _ in queued] == [
        ("a", A, "", 0), ("b", D, "", 0), ("a", E, "", 0),  # alerts (no turn start)
        ("a", C, "svc-a", 1), ("b", F, "svc-b", 1),  # negative feedback, oldest first
    ]  # fmt: skip
    assert [trace for _, trace, *_ in review.queue(store, tenant="b")] == [D, F]


def test_the_alerts_page_finds_the_tool_of_each_span_an_alert_is_pinned_to(
    store: ClientStore,
) -> None:
    week = AlertFilters(NOW_NS - 7 * DAY_NS, NOW_NS)
    assert alerts.top_tools(store, Viewer(None), week, 10) == [
        ("issue_refund", 2), ("lookup_order", 1),
    ]  # fmt: skip
    assert alerts.top_tools(store, Viewer("b"), week, 10) == [("issue_refund", 1)]
    keys = [(tenant, trace, f"{n:016x}") for tenant, trace in TOOLED for n in (0, 1)]
    assert traces.span_tools(store, Viewer(None), keys) == {
        (tenant, trace, f"{1:016x}"): tool for (tenant, trace), tool in TOOLED.items()
    }  # the roots call no tool
    assert traces.span_tools(store, Viewer("a"), keys) == {
        ("a", "1" * 32, f"{1:016x}"): "lookup_order", ("a", "2" * 32, f"{1:016x}"): "issue_refund",
    }  # fmt: skip
