"""The tables views fill from `spans` (and `scores`) for the conversation page, the review
queue, the alerts page's tools and traces, every read of a trace's spans by key and the
trace list's scores (migrations 0019 `conversation_traces`, 0020 `feedback_spans`, 0022
`tool_spans`, 0023 `trace_times`, 0024 `trace_scores`, 0025 `trace_counts`; 0026's tool of
each alert): the pages answer from them what they answered from the spans (and scores),
for rows stored before the migrations (their backfill) and after (their views), replays,
rows stored twice and other tenants included."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pytest
from pathgrade.batch_plane.store import alerts, conversations, review, trace_list, traces
from pathgrade.batch_plane.store.alerts import AlertFilters
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.tenancy import Viewer
from pathgrade.schemas import genai
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.migrations import bundled_migrations
from pathgrade.schemas.model import GenAIFields, Span

from pathgrade.web.alerts_page import AlertQuery, load_alerts
from pathgrade.web.store_reads import ReadStore, viewing

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


def store_scores(store: ClientStore, scores: list[tuple[str, str, str, str, int]]) -> None:
    """Scores (id, tenant, trace, metric, created second)."""
    store.insert(
        "scores",
        [[score, tenant, trace, metric, second] for score, tenant, trace, metric, second in scores],
        ["ScoreId", "Tenant", "TraceId", "Metric", "CreatedAt"],
    )


A, B, C, D, E, F, G = (letter * 32 for letter in "abcdefg")
HOUR_NS = 3600 * 10**9
TOOLED = {("a", "1" * 32): "lookup_order", ("a", "2" * 32): "issue_refund",
          ("b", "3" * 32): "issue_refund"}  # fmt: skip
"""(tenant, trace) -> the tool of its span 1, which an alert is pinned to."""


def tool_spans(tenant: str, trace: str) -> list[Span]:
    return [span(tenant, trace, 0, 3, root=True),
            span(tenant, trace, 1, 3, tool=TOOLED[(tenant, trace)])]  # fmt: skip


def pinned_alerts(tenant: str, trace: str, tool: str) -> list[list[object]]:
    """Rows of an alert on the root and one on the tool span of a `tool_spans` trace, the
    latter carrying `tool` (as the realtime plane writes them; "": as stored before)."""
    return [
        Alert(alert_key=f"p-{trace}-{n:016x}", code="PG105", name="n", severity="low",
              kind="cannot_decide", reason="r", trace_id=trace, span_id=f"{n:016x}",
              tenant=tenant, service="", agent="", conversation_id="", risk_tier="low",
              policy="default", trace_start_ns=NOW_NS - 4 * DAY_NS,
              trace_end_ns=NOW_NS - 2 * DAY_NS, detected_at_ns=NOW_NS - 2 * DAY_NS,
              tool=tool if n else "").row()
        for n in (0, 1)
    ]  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """Spans stored before migrations 0019-0020 (backfilled) and after (their views)."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("lookups"))))
    migrate(store.client, [m for m in bundled_migrations() if m.version < 19])
    store_spans(store, conversation_spans(A, "a", 5))
    store_spans(store, [span("a", C, 0, 4, feedback="thumbs_down", root=True)])
    store_spans(store, tool_spans("a", "1" * 32))
    store_scores(store, [("s1", "a", A, "m1", 1), ("s2", "a", A, "m2", 1)])
    before = [row[:-1] for row in pinned_alerts("a", "1" * 32, "")]  # no Tool column yet
    store.insert("alerts", before, list(ALERT_COLUMNS[:-1]))
    store_spans(store, [span("a", G, 0, 2.5, root=True)])  # G's roots: one before and one after
    migrate(store.client)
    store_spans(store, [span("a", G, 7, 2.5 + HOUR_NS / DAY_NS, root=True)])  # an hour apart
    store_scores(store, [("s1", "a", A, "m1", 2), ("s3", "a", B, "m1", 1),  # s1 replayed
                         ("s4", "b", D, "m1", 1), ("s5", "b", A, "m1", 1)])  # fmt: skip
    store_spans(store, tool_spans("a", "2" * 32) + tool_spans("b", "3" * 32))
    store_spans(store, tool_spans("a", "2" * 32))  # stored twice, as written: one span each
    store_spans(store, conversation_spans(B, "a", 2))
    replayed = [replace(s, name=f"{s.name} again", received_at_ns=s.received_at_ns + 1)
                for s in conversation_spans(B, "a", 2)]  # fmt: skip
    store_spans(store, replayed)  # a replay, received later: its rows are the latest
    store_spans(store, conversation_spans(D, "b", 3))  # another tenant's
    store_spans(store, [span("a", E, 0, 1, conversation="c2", root=True)])
    store_spans(store, [span("a", E, 0, 1, conversation="c2", root=True)])  # again
    store_spans(store, [span("b", F, 0, 1, feedback="-1", root=True),
                        span("b", F, 1, 1, feedback="good")])  # fmt: skip
    store_spans(store, [span("a", "9" * 32, 0, 1, feedback="positive", root=True)])
    store.insert(
        "alerts",
        [[f"k-{trace[0]}", tenant, "PG110", "high", "r", trace, "violation"]
         for tenant, trace in (("a", A), ("b", D), ("a", E))],
        ["AlertKey", "Tenant", "Code", "Severity", "Reason", "TraceId", "Kind"],
    )  # fmt: skip
    for (tenant, trace), tool in list(TOOLED.items())[1:]:
        for _ in range(2):  # each stored twice (a second consumer's): one alert
            store.insert("alerts", pinned_alerts(tenant, trace, tool), list(ALERT_COLUMNS))
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
    """The alerts carry it (migration 0026: the ones stored before from `tool_spans`)."""
    week = AlertFilters(NOW_NS - 7 * DAY_NS, NOW_NS)
    tally = alerts.tallies(store, Viewer(None), week, week.start_ns, DAY_NS)
    assert tally.top(alerts.TOOL, 10) == [("issue_refund", 2), ("lookup_order", 1)]
    tally = alerts.tallies(store, Viewer("b"), week, week.start_ns, DAY_NS)
    assert tally.top(alerts.TOOL, 10) == [("issue_refund", 1)]
    listed = {
        (row["Tenant"], row["TraceId"], row["SpanId"]): row["Tool"]
        for row in alerts.page(store, Viewer(None), week, None, 50)
        if (row["Tenant"], row["TraceId"]) in TOOLED
    }
    assert listed == {
        (tenant, trace, f"{n:016x}"): tool if n else ""
        for (tenant, trace), tool in TOOLED.items()
        for n in (0, 1)
    }  # the roots call no tool
    assert {row["Tool"] for row in alerts.page(store, Viewer("b"), week, None, 50)} == {
        "issue_refund", ""
    }  # fmt: skip


def test_a_traces_span_times_come_from_trace_times_before_and_after_its_migration(
    store: ClientStore,
) -> None:
    """Migration 0023's `trace_times` (backfilled from `spans_trace_id_ts`, which it
    replaces, then filled by its view) bounds each trace's spans as the spans do."""
    stored = {
        (tenant, trace): (first, last)
        for tenant, trace, first, last in store.query(
            "SELECT Tenant, TraceId, toUnixTimestamp64Nano(min(Timestamp)), "
            "toUnixTimestamp64Nano(max(Timestamp)) FROM spans GROUP BY Tenant, TraceId"
        ).rows
    }
    before = [("a", A), ("a", C), ("a", "1" * 32)]  # stored before the migrations
    after = [("a", B), ("b", D), ("a", "2" * 32), ("b", F)]  # after (B replayed)
    for tenant, trace in before + after:
        condition, bounds = traces.span_times(store, [trace], [tenant])
        assert condition != "1"
        assert (bounds["first_span"], bounds["last_span"]) == stored[(tenant, trace)]
    _, both = traces.span_times(store, [A, D], ["a", "b"])
    assert (both["first_span"], both["last_span"]) == (stored[("a", A)][0], stored[("b", D)][1])
    assert traces.span_times(store, [D], ["a"]) == ("1", {})  # another tenant's trace
    assert traces.tenants_of(store, Viewer(None), D) == ["b"]
    assert not store.query("EXISTS TABLE spans_trace_id_ts").rows[0][0]


def test_the_trace_lists_scores_of_each_trace_come_from_trace_scores_as_from_scores(
    store: ClientStore,
) -> None:
    """Migration 0024's `trace_scores` (backfilled, then filled by its view) counts each
    trace's scores as `scores FINAL` does: a replayed score once, each tenant's own."""
    keys = [("a", A), ("a", B), ("b", D), ("b", A), ("a", C)]
    counted = {
        (tenant, trace): n for tenant, trace, n in trace_list.scores_of(store, Viewer(None), keys)
    }
    assert counted == {("a", A): 2, ("a", B): 1, ("b", D): 1, ("b", A): 1}
    assert counted == {
        (tenant, trace): n
        for tenant, trace, n in store.query(
            "SELECT Tenant, TraceId, count() FROM scores FINAL GROUP BY Tenant, TraceId"
        ).rows
    }
    own = trace_list.scores_of(store, Viewer("a"), keys)
    assert sorted((tenant, trace, n) for tenant, trace, n in own) == [("a", A, 2), ("a", B, 1)]


def direct_counts(store: ClientStore, viewer: Viewer, start_ns: int, end_ns: int) -> tuple:
    """The traces whose root started in the range, and the alerts detected in it per tool
    of their span, counted from `trace_roots`, `alerts` and `tool_spans` as they are."""
    where = f"{viewer.where('Tenant')} AND "
    values = {"start": start_ns, "end": end_ns, **viewer.parameters}
    traces = store.query(
        f"SELECT uniqExact(Tenant, TraceId) FROM trace_roots WHERE {where}"
        "Timestamp >= fromUnixTimestamp64Nano({start:Int64}) "
        "AND Timestamp < fromUnixTimestamp64Nano({end:Int64})",
        values,
    ).rows[0][0]
    tools = store.query(
        "SELECT tool, count() AS n FROM (SELECT Tenant, TraceId, SpanId FROM alerts FINAL "
        f"WHERE {where}DetectedAtNs >= {{start:Int64}} AND DetectedAtNs < {{end:Int64}}) AS "
        "pinned INNER JOIN (SELECT DISTINCT Tenant, TraceId, SpanId, GenAIToolName AS tool "
        "FROM tool_spans) AS tools USING (Tenant, TraceId, SpanId) GROUP BY tool "
        "ORDER BY n DESC, tool",
        values,
    ).rows
    return traces, [(tool, n) for tool, n in tools]


@pytest.mark.parametrize("viewer", [Viewer(None), Viewer("a"), Viewer("b")])
def test_the_alerts_pages_traces_and_tools_are_the_counts_of_the_stored_rows(
    store: ClientStore, viewer: Viewer
) -> None:
    """Over ranges whose edges fall anywhere (within an hour, on a root, days apart), the
    page's count of traces (`trace_counts`' whole hours, `trace_roots` at the edges) and its
    top tools (the alerts' `Tool`) are the counts of the rows themselves: the roots and
    spans stored twice, the trace with two roots an hour apart and the replay once each."""
    g_root = NOW_NS - int(2.5 * DAY_NS)
    edges = [NOW_NS - int(d * DAY_NS) for d in (7, 5.01, 3.2, 2.5, 2.49, 1.2, 1, 0.5)]
    ranges = [(s, e) for s in edges for e in [*edges, NOW_NS + 1] if s < e]
    ranges += [(g_root, g_root + 1), (g_root - HOUR_NS // 2, g_root + 60 * 10**9),
               (g_root - 2 * HOUR_NS, g_root), (g_root - 2 * HOUR_NS, g_root + 1)]  # fmt: skip
    reads, counted = ReadStore(store), set()
    for start, end in ranges:
        query = AlertQuery(start_ns=start, end_ns=end, raw={})
        with viewing(viewer.tenant):
            page = load_alerts(reads, viewer, query)
        traces, tools = direct_counts(store, viewer, start, end)
        assert (page.traces_in_range, page.top_tools) == (traces, tools), (start, end)
        counted.add(traces)
    assert len(counted) > 3 and max(counted) > 0  # the ranges hold different traces


@pytest.mark.parametrize("viewer", [Viewer(None), Viewer("a"), Viewer("b")])
def test_a_filtered_lists_counts_per_tool_are_its_traces_with_a_span_of_each(
    store: ClientStore, viewer: Viewer
) -> None:
    """The counts per agent, tool and model of a filtered list (`trace_facet_counts` over
    the time from its oldest root) are its traces with a span of each, counted from the
    spans themselves: a trace stored twice once, a trace backfilled by migration 0018's
    insert as one filled by its view, another tenant's not at all."""
    query = trace_list.TraceSelection(start_ns=NOW_NS - 7 * DAY_NS, end_ns=NOW_NS, text="step")
    roots = trace_list.newest(store, viewer, query, [], 1_000)
    keys = sorted({(row[0], row[1]) for row in roots})
    since = min(row[2] for row in roots)
    counted = trace_list.trace_facet_counts(
        store, viewer, keys, since, NOW_NS + trace_list.SPAN_SLACK_NS
    )
    direct = store.query(
        "SELECT 'tool', GenAIToolName, uniqExact(Tenant, TraceId) FROM spans "
        "WHERE (Tenant, TraceId) IN {keys:Array(Tuple(String, String))} "
        "AND GenAIToolName != '' GROUP BY GenAIToolName",
        {"keys": keys},
    ).rows
    assert sorted(counted) == sorted(tuple(row) for row in direct)
    expected = {None: {"issue_refund": 2, "lookup_order": 1}, "a": {"issue_refund": 1,
                "lookup_order": 1}, "b": {"issue_refund": 1}}[viewer.tenant]  # fmt: skip
    assert {value: n for facet, value, n in counted if facet == "tool"} == expected
