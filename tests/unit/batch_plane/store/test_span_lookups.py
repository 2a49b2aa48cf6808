"""The tables views fill from `spans` for the conversation page and the review queue
(migrations 0019 `conversation_traces`, 0020 `feedback_spans`): the pages answer from them
what they answered from the spans, for spans stored before the migration (its backfill)
and after it (its view), replays and other tenants included."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.store import conversations, review
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
    feedback: str = "", root: bool = False,
) -> Span:  # fmt: skip
    """Span `number` of `trace`, started `days_ago`, of `conversation`, with `feedback`."""
    start = NOW_NS - int(days_ago * DAY_NS)
    return Span(
        tenant, trace, f"{number:016x}", "" if root else f"{0:016x}", f"step {number}",
        "Internal", start, start + 1000, service_name=f"svc-{tenant}",
        attributes={genai.PG_FEEDBACK: feedback} if feedback else {},
        genai=GenAIFields(operation="chat", conversation_id=conversation),
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


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """Spans stored before migrations 0019-0020 (backfilled) and after (their views)."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("lookups"))))
    migrate(store.client, [m for m in bundled_migrations() if m.version < 19])
    store_spans(store, conversation_spans(A, "a", 5))
    store_spans(store, [span("a", C, 0, 4, feedback="thumbs_down", root=True)])
    migrate(store.client)
    store_spans(store, conversation_spans(B, "a", 2))
    store_spans(store, conversation_spans(B, "a", 2))  # a replay
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
        ("b", D, "step 1"), ("a", B, "step 0"), ("a", B, "step 1"), ("b", D, "step 2"),
        ("a", B, "step 2"),
    ]  # fmt: skip
    own = conversations.spans(store, Viewer("a"), "c1", 4)
    assert [(s.trace_id, s.name) for s in own] == [
        (A, "step 0"), (A, "step 1"), (A, "step 2"), (B, "step 0"),
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
