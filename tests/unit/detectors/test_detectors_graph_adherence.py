"""PG118 off-graph-path: a turn's walk against the graph the policy declares per service,
read from the node spans each instrumentation writes."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pathgrade.content.graph_documents import load_graph
from pathgrade.content.graph_walk import node_visits
from pathgrade.detectors import PolicyError, load_policy, run_detectors
from pathgrade.detectors.graph_adherence import walk_problems
from pathgrade.detectors.view import DetectorContext, TraceView, turn_digest
from pathgrade.schemas import genai
from pathgrade.schemas.model import GenAIFields, Span, Trace
from pathgrade.schemas.turns import TurnDigest

from tests.support.traces import detect

GRAPH = {
    "start": "greetings",
    "terminals": ["greetings", "test_drive", "faq"],
    "nodes": [{"id": "greetings"}, {"id": "test_drive"}, {"id": "faq"}],
    "edges": [{"from": "greetings", "to": "test_drive"}, {"from": "greetings", "to": "faq"}],
}


class WalkTrace:
    """A turn whose nodes are written the way one instrumentation writes them."""

    def __init__(
        self, convention: str, trace_id: str = "c" * 32, start_ns: int = 1_000,
        conversation: str = "", attributes: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.convention = convention
        self.trace_id = trace_id
        self.start_ns = start_ns
        self.spans: list[Span] = []
        root_fields = {"conversation_id": conversation}
        self.root = self._span("", "invoke_agent dealer", "invoke_agent", "dealer",
                               dict(attributes or {}), root_fields)  # fmt: skip

    def node(self, node: str, parent: Span | None = None) -> Span:
        """One node span (under the root unless `parent` is given)."""
        parent_id = (parent or self.root).span_id
        if self.convention == "openllmetry":
            attributes = {genai.TL_LANGGRAPH_NODE: node, genai.TASK_NAME: node}
            return self._span(parent_id, f"execute_task {node}", "task", "", attributes)
        if self.convention == "openinference":
            metadata = json.dumps({"langgraph_node": node, "langgraph_step": 1})
            return self._span(parent_id, node, "chain", "", {genai.OI_METADATA: metadata})
        return self._span(parent_id, f"invoke_agent {node}", "invoke_agent", node, {})

    def inner(self, node: Span, name: str) -> Span:
        """A step nested in a node that carries the node's marker under another name."""
        attributes: dict[str, Any] = {genai.TL_LANGGRAPH_NODE: self._node_name(node)}
        attributes[genai.TASK_NAME] = name
        attributes[genai.OI_METADATA] = json.dumps({"langgraph_node": self._node_name(node)})
        return self._span(node.span_id, name, "task", "", attributes)

    def tool(self, parent: Span, name: str) -> Span:
        fields = {"tool_name": name}
        return self._span(parent.span_id, f"execute_tool {name}", "execute_tool", "", {}, fields)

    def build(self) -> Trace:
        return Trace("default", self.trace_id, list(self.spans))

    def _node_name(self, span: Span) -> str:
        return span.attributes.get(genai.TASK_NAME) or span.name

    def _span(
        self,
        parent: str,
        name: str,
        operation: str,
        agent: str,
        attributes: dict[str, Any],
        fields: dict[str, Any] | None = None,
    ) -> Span:
        span = Span(
            tenant="default",
            trace_id=self.trace_id,
            span_id=f"{len(self.spans) + 1:016x}",
            parent_span_id=parent,
            name=name,
            kind="Internal",
            start_ns=self.start_ns + 10 * len(self.spans),
            end_ns=self.start_ns + 1_000,
            attributes=attributes,
            genai=GenAIFields(operation=operation, agent_name=agent, **(fields or {})),
        )
        self.spans.append(span)
        return span


def walk(convention: str, *nodes: str) -> Trace:
    builder = WalkTrace(convention)
    for node in nodes:
        builder.node(node)
    return builder.build()


CONVENTIONS = ["openllmetry", "openinference", "genai"]


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_on_graph_turn_is_quiet_and_each_way_off_the_graph_fires(convention: str) -> None:
    params = {"graph": GRAPH}
    assert detect("PG118", walk(convention, "greetings", "test_drive"), params) == []
    assert detect("PG118", walk(convention, "greetings"), params) == []
    (missing,) = detect("PG118", walk(convention, "greetings", "test_drive", "faq"), params)
    assert missing.details["problem"] == "missing_edge"
    assert (missing.details["from"], missing.details["node"]) == ("test_drive", "faq")
    assert missing.reason == "Edge 'test_drive' -> 'faq' is not in the declared graph."
    assert missing.span_id == "0000000000000004"  # the span of the node entered off-graph
    problems = [
        f.details["problem"] for f in detect("PG118", walk(convention, "faq", "billing"), params)
    ]
    assert problems == ["wrong_start", "unknown_node"]


def test_turn_ending_on_a_non_terminal_fires_unless_the_walk_spans_the_conversation() -> None:
    graph = {**GRAPH, "terminals": ["test_drive", "faq"]}
    (end,) = detect("PG118", walk("genai", "greetings"), {"graph": graph})
    assert end.details["problem"] == "non_terminal_end"
    conversation = {"graph": graph, "walk": "conversation"}
    assert detect("PG118", walk("genai", "greetings"), conversation) == []
    assert detect("PG118", walk("genai", "test_drive"), conversation) == []  # continues
    (edge,) = detect("PG118", walk("genai", "test_drive", "faq"), conversation)
    assert edge.details["problem"] == "missing_edge"


def _digest_of(trace: Trace) -> TurnDigest:
    return turn_digest(TraceView(trace, DetectorContext().conventions), "conv-1")


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_a_conversation_walk_checks_the_step_from_the_earlier_turns_last_node(
    convention: str,
) -> None:
    graph = {**GRAPH, "edges": [*GRAPH["edges"], {"from": "test_drive", "to": "test_drive"}]}
    conversation = {"graph": graph, "walk": "conversation"}
    first = walk(convention, "greetings", "test_drive")
    assert _digest_of(first).graph_nodes == ["greetings", "test_drive"]
    after_first = DetectorContext(history=[_digest_of(first)])
    assert detect("PG118", walk(convention, "test_drive"), conversation, after_first) == []
    (step,) = detect("PG118", walk(convention, "faq"), conversation, after_first)
    assert (step.details["problem"], step.details["from"], step.details["node"]) == (
        "missing_edge", "test_drive", "faq",
    )  # fmt: skip
    assert step.span_id == walk(convention, "faq").spans[-1].span_id  # the turn's own node span
    later = walk(convention, "test_drive", "faq")  # off the graph at the turn's second node
    (second,) = detect("PG118", later, conversation, after_first)
    assert second.span_id == later.spans[-1].span_id
    nodeless = DetectorContext(history=[_digest_of(first), _digest_of(Trace("t", "9" * 32, []))])
    assert detect("PG118", walk(convention, "faq"), conversation, nodeless)  # skips the gap
    turn_walk = {"graph": graph}  # each turn walks the whole graph: no step across turns
    assert detect("PG118", walk(convention, "greetings", "faq"), turn_walk, after_first) == []


def test_nested_steps_and_subgraph_nodes_are_not_visits_and_tools_go_to_their_node() -> None:
    builder = WalkTrace("openllmetry")
    greetings = builder.node("greetings")
    builder.inner(greetings, "RunnableCallable")  # the routing function inside the node
    sub = builder.node("test_drive")
    inner = builder.node("inner_step", parent=sub)  # a subgraph's own node
    builder.tool(inner, "book_test_drive")
    trace = builder.build()
    assert detect("PG118", trace, {"graph": GRAPH}) == []
    assert [(v.node, v.tools) for v in node_visits(trace)] == [
        ("greetings", ()),
        ("test_drive", ("book_test_drive",)),
    ]


def test_no_node_span_cannot_decide_and_no_graph_is_quiet() -> None:
    (finding,) = detect("PG118", WalkTrace("genai").build(), {"graph": GRAPH})
    assert finding.kind == "cannot_decide" and finding.details["missing"] == "node_spans"
    assert detect("PG118", walk("genai", "x", "y")) == []


def test_walk_problems_lists_every_problem_in_walk_order() -> None:
    graph = load_graph(GRAPH)
    found = walk_problems(graph, ["faq", "greetings", "nowhere", "faq"])
    assert [(p.problem, p.index) for p in found] == [
        ("wrong_start", 0),
        ("missing_edge", 1),
        ("unknown_node", 2),
    ]
    assert walk_problems(graph, []) == []


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policies" / "policy.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_policy_names_a_graph_file_per_service_relative_to_the_policy(tmp_path: Path) -> None:
    langgraph = {
        "nodes": [{"id": "__start__"}, {"id": "greetings"}, {"id": "faq"}, {"id": "__end__"}],
        "edges": [
            {"source": "__start__", "target": "greetings"},
            {"source": "greetings", "target": "faq"},
            {"source": "faq", "target": "__end__"},
        ],
    }
    (tmp_path / "policies" / "graphs").mkdir(parents=True)
    (tmp_path / "policies" / "graphs" / "dealer.json").write_text(json.dumps(langgraph))
    policy = load_policy(
        write_policy(
            tmp_path,
            """\
            version: 1
            services:
              dealer:
                agent_graph: {graph: graphs/dealer.json}
            """,
        )
    )
    dealer = policy.resolve("dealer", "dealer")
    graph = dealer.params["PG118"].graph  # type: ignore[attr-defined]
    assert (graph.start, graph.terminals) == ("greetings", ["faq"])
    findings = run_detectors(walk("genai", "greetings", "faq", "greetings"), dealer)
    assert [f.details["problem"] for f in findings if f.code == "PG118"] == [
        "missing_edge",
        "non_terminal_end",
    ]
    other = policy.resolve("billing", "billing-agent")
    assert other.params["PG118"].graph is None  # type: ignore[attr-defined]


def test_bad_graph_in_a_policy_names_the_line_and_the_file(tmp_path: Path) -> None:
    path = write_policy(
        tmp_path,
        """\
        version: 1
        services:
          dealer:
            agent_graph:
              graph: missing.json
        """,
    )
    with pytest.raises(PolicyError, match=r"policy.yaml:5: services.dealer.agent_graph.graph"):
        load_policy(path)
    with pytest.raises(PolicyError, match=r"missing\.json'?: cannot read"):
        load_policy(path)
    inline = write_policy(
        tmp_path,
        """\
        version: 1
        defaults:
          agent_graph:
            graph: {start: a, terminals: [b], nodes: [{id: a}], edges: []}
        """,
    )
    with pytest.raises(PolicyError, match="terminal 'b': unknown node"):
        load_policy(inline)


@pytest.mark.parametrize("first", ["faq", "test_drive"])  # sorting before and after the start
def test_a_turn_starting_off_the_start_names_its_first_node(first: str) -> None:
    """Whichever side of the start's name the first node sorts; the finding names that
    node (not a later one) and no edge's `from`."""
    found = detect("PG118", walk("genai", first, "greetings"), {"graph": GRAPH})
    wrong = [f for f in found if f.details["problem"] == "wrong_start"]
    assert [f.details for f in wrong] == [
        {"problem": "wrong_start", "node": first, "path": [first, "greetings"]}
    ]
    assert wrong[0].reason == f"The turn starts at {first!r}; the graph starts at 'greetings'."


def test_a_walk_problem_cannot_change() -> None:
    (problem,) = walk_problems(load_graph(GRAPH), ["faq"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.index = 1  # type: ignore[misc]
