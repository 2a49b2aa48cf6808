"""The trace page draws the agents of a multi-agent turn as lanes with the hand-offs
between them (`web.agent_lanes`), on the waterfall's time axis."""

from __future__ import annotations

import re

import pytest
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from starlette.testclient import TestClient

from pathgrade.web.agent_lanes import turn_lanes
from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.traces import TraceBuilder


def transfers() -> TraceBuilder:
    """The OpenAI Agents SDK's shape: triage hands off to billing, which hands back."""
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        b.chat(calls=[("h1", "transfer_to_billing")])
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": "c1"})
    with b.inside(b.agent("triage")):
        b.chat(text="Anything else?")
    return b


def test_each_agent_is_a_lane_and_each_handoff_joins_two_lanes_when_the_receiver_starts() -> None:
    trace = transfers().build()
    start = min(s.start_ns for s in trace.spans)
    duration = max(s.end_ns for s in trace.spans) - start
    lanes = turn_lanes(trace, start, duration)
    assert lanes is not None and lanes.agents == ["triage", "billing"]
    assert lanes.path == ["triage", "billing", "triage"]
    assert [r.lane for r in lanes.runs] == [0, 1, 0]
    first, back = lanes.handoffs
    assert (first.sender, first.receiver, first.kind) == ("triage", "billing", "transfer")
    assert (first.from_lane, first.to_lane, back.from_lane, back.to_lane) == (0, 1, 1, 0)
    assert (first.carried_by, back.carried_by) == ("handoff to billing", "")  # the span shows it
    billing = next(s for s in trace.spans if s.name == "invoke_agent billing")
    assert first.at_pct == pytest.approx(100 * (billing.start_ns - start) / duration)
    assert lanes.runs[1].offset_pct == pytest.approx(first.at_pct)


def test_a_single_agent_turn_has_no_lanes() -> None:
    b = TraceBuilder()
    b.tool("lookup_order", {"order_id": "A1"})
    assert turn_lanes(b.build(), 0, 1) is None


def test_the_trace_page_draws_the_lanes_and_lists_the_handoffs(store: ClientStore) -> None:
    trace = transfers().build()
    store.insert("spans", span_rows(trace.spans), list(SPAN_COLUMNS))
    client = TestClient(create_app(UiSettings(store)), base_url="http://127.0.0.1:8080")
    page = client.get(f"/trace/{trace.trace_id}").text
    assert re.findall(r'class="lane" data-agent="([^"]+)"', page) == ["triage", "billing"]
    triage, billing = page.split('class="lane" data-agent=')[1:3]
    assert (triage.count('class="lane-run'), billing.count('class="lane-run')) == (2, 1)
    assert "triage → billing → triage" in page
    links = re.findall(r'class="handoff handoff-(\w+) span-link( up)?"', page)
    assert links == [("transfer", ""), ("transfer", " up")]  # down to billing, back up
    assert page.count('<li data-sender="') == 2
