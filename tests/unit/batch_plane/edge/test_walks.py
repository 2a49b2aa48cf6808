"""EDGE's walk of a multi-agent turn: the agents control passed through, its hand-offs the
edges of the graph EDGE infers (`batch_plane.edge.walks`)."""

from __future__ import annotations

from pathgrade.batch_plane.edge.traffic import infer_graph
from pathgrade.batch_plane.edge.walks import turn_walk
from pathgrade.content.graph_walk import node_visits

from tests.support.traces import TraceBuilder


def openai_agents_turn() -> TraceBuilder:
    """OpenInference's shape: triage hands off to billing (a handoff span), billing back."""
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        b.tool("transfer_to_billing", {})
        b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": "c1"})
    with b.inside(b.agent("triage")):
        b.chat(text="Anything else?")
    return b


def test_a_transfer_walks_the_agents_and_leaves_the_handoff_calls_out_of_their_tools() -> None:
    walk = turn_walk(openai_agents_turn().build())
    assert [(v.node, v.tools) for v in walk] == [
        ("triage", ()), ("billing", ("get_account",)), ("triage", ())
    ]  # fmt: skip


def test_sub_agents_an_agent_delegates_to_are_the_nodes_as_before() -> None:
    b = TraceBuilder(agent="support-agent")
    b.tool("lookup_account", {"account_id": "AC-1"})
    with b.inside(b.agent("billing-agent")):
        b.tool("refund_duplicate", {"account_id": "AC-1"})
    trace = b.build()
    assert turn_walk(trace) == node_visits(trace)
    assert [v.node for v in turn_walk(trace)] == ["billing-agent"]


def test_a_single_agent_turn_walks_as_before() -> None:
    b = TraceBuilder()
    b.tool("lookup_order", {"order_id": "A1"})
    trace = b.build()
    assert turn_walk(trace) == node_visits(trace)


def test_the_inferred_graph_of_multi_agent_traffic_has_agents_for_nodes_handoffs_for_edges() -> (
    None
):
    graph = infer_graph([openai_agents_turn().build()])
    assert [n["id"] for n in graph["nodes"]] == ["triage", "billing"]
    assert [(e["from"], e["to"]) for e in graph["edges"]] == [
        ("triage", "billing"), ("billing", "triage")
    ]  # fmt: skip
    assert graph["start"] == "triage" and graph["inferred_from"]["structure"] == "observed"
    assert [(h["from"], h["to"], h["kind"], h["handoffs"]) for h in graph["handoffs"]] == [
        ("triage", "billing", "transfer", 1), ("billing", "triage", "transfer", 1)
    ]  # fmt: skip


def test_the_inferred_graph_lists_a_sub_agent_call_from_the_agent_its_nodes_are_under() -> None:
    b = TraceBuilder(agent="support-agent")
    with b.inside(b.agent("billing-agent")):
        b.tool("refund_duplicate", {"account_id": "AC-1"})
    graph = infer_graph([b.build()])
    assert [n["id"] for n in graph["nodes"]] == ["billing-agent"]
    assert graph["handoffs"] == [
        {"from": "support-agent", "to": "billing-agent", "kind": "delegation", "handoffs": 1,
         "turns": 1}
    ]  # fmt: skip
