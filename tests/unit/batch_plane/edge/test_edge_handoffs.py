"""The hand-offs EDGE's graph views mark: read from a turn, counted over turns, drawn."""

from __future__ import annotations

import re

from pathgrade.batch_plane.edge.handoffs import handoff_counts, turn_handoffs
from pathgrade.batch_plane.edge.report import AGENT_RADIUS, HANDOFF_STYLE, graph_svg
from pathgrade.batch_plane.edge.store import turn_record
from pathgrade.content.graph_documents import load_graph
from pathgrade.schemas.model import Trace

from tests.support.traces import TraceBuilder


def triage_turn(trace_id: str = "a" * 32) -> Trace:
    """Triage calls a lookup sub-agent (nested), then transfers control to billing."""
    b = TraceBuilder(trace_id, agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        with b.inside(b.agent("lookup")):
            b.tool("get_account", {"customer_id": "c1"})
        b.tool("transfer_to_billing", {"customer_id": "c1"})
    with b.inside(b.agent("billing")):
        b.tool("change_plan", {"customer_id": "c1", "plan": "basic"})
    return b.build()


def test_a_turn_shows_its_sub_agent_call_and_its_transfer_by_agent_names() -> None:
    assert turn_handoffs(triage_turn()) == [
        ("triage", "lookup", "delegation"),
        ("triage", "billing", "transfer"),
    ]


def test_a_single_agent_turn_has_no_handoff() -> None:
    assert turn_handoffs(TraceBuilder().build()) == []


def test_counts_are_per_pair_and_kind_with_the_turns_they_occur_in() -> None:
    turns = [
        [("a", "b", "transfer"), ("b", "a", "transfer"), ("a", "b", "transfer")],
        [("a", "b", "transfer"), ("a", "c", "delegation")],
        [],
    ]
    assert handoff_counts(turns) == [
        {"from": "a", "to": "b", "kind": "transfer", "handoffs": 3, "turns": 2},
        {"from": "b", "to": "a", "kind": "transfer", "handoffs": 1, "turns": 1},
        {"from": "a", "to": "c", "kind": "delegation", "handoffs": 1, "turns": 1},
    ]


def test_a_stored_turn_record_carries_its_handoffs_and_no_content() -> None:
    record = turn_record(triage_turn())
    assert record is not None
    assert record.handoffs == turn_handoffs(triage_turn())
    assert "c1" not in repr(record.handoffs)


GRAPH = load_graph(
    {
        "start": "triage",
        "terminals": ["billing"],
        "nodes": [{"id": "triage"}, {"id": "billing"}, {"id": "lookup"}],
        "edges": [{"from": "triage", "to": "billing"}, {"from": "triage", "to": "lookup"},
                  {"from": "lookup", "to": "billing"}],
    }
)  # fmt: skip


def _edges(svg: str) -> dict[str, tuple[str, str]]:
    """data-edge -> (class, data-handoff) of every drawn edge."""
    return {
        m[2]: (m[0], m[1])
        for m in re.findall(
            r'class="(edge[^"]*)"(?: data-handoff="([^"]*)")? data-edge="([^"]*)"', svg
        )
    }


def test_graph_edges_that_are_handoffs_are_marked_with_their_kind() -> None:
    handoffs = handoff_counts([turn_handoffs(triage_turn())])
    svg = graph_svg(GRAPH, {}, handoffs=handoffs)
    assert _edges(svg) == {
        "triage -&gt; billing": ("edge handoff", "transfer"),
        "triage -&gt; lookup": ("edge handoff", "delegation"),
        "lookup -&gt; billing": ("edge", ""),
    }
    transfer, delegation = (
        re.search(rf'stroke="([^"]+)"[^>]*data-handoff="{kind}"', svg)[0]
        for kind in ("transfer", "delegation")
    )
    assert HANDOFF_STYLE["transfer"][0] in transfer and "dasharray" not in transfer
    assert HANDOFF_STYLE["delegation"][0] in delegation and "dasharray" in delegation
    legend = re.search(r'<g class="handoff-legend".*?</g>', svg)[0]
    assert re.findall(r"hand-off: ([^<]+)<", legend) == [
        "transfer of control", "delegation (sub-agent call)"
    ]  # fmt: skip


def test_a_sub_agent_call_from_outside_the_graph_adds_that_agent_and_its_edges() -> None:
    """The recruitment example's shape: an orchestrator whose sub-agents are the graph."""
    handoffs = [
        {"from": "router<&>", "to": node, "kind": "delegation", "handoffs": 2, "turns": 2}
        for node in ("triage", "billing")
    ]
    svg = graph_svg(GRAPH, {}, handoffs=handoffs)
    agents = re.findall(r'r="([\d.]+)"[^>]*class="node agent" data-node="([^"]*)"', svg)
    assert agents == [(f"{AGENT_RADIUS:.1f}", "router&lt;&amp;&gt;")]
    drawn = _edges(svg)
    assert drawn["router&lt;&amp;&gt; -&gt; triage"] == ("edge handoff", "delegation")
    assert drawn["router&lt;&amp;&gt; -&gt; billing"] == ("edge handoff", "delegation")
    assert drawn["triage -&gt; billing"] == ("edge", "")
    assert "router<&>" not in svg
    assert re.findall(r"hand-off: ([^<]+)<", svg) == ["delegation (sub-agent call)"]


def test_without_handoffs_the_picture_is_the_plain_graph() -> None:
    svg = graph_svg(GRAPH, {})
    assert "handoff" not in svg and "node agent" not in svg
    assert set(_edges(svg).values()) == {("edge", "")}
