"""Hand-offs as structure: the agent runs of a turn and the hand-offs between them, from
GenAI nesting, OpenInference handoff spans, sequential sub-agents and LangGraph nodes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.content.handoffs import _flow, handoff_flow
from pathgrade.schemas import genai
from pathgrade.schemas.model import GenAIFields, Span, Trace

from tests.support.traces import TraceBuilder


def summary(trace: Trace) -> list[tuple[str, str, str]]:
    flow = handoff_flow(trace)
    return [(flow.sender(h).agent, flow.receiver(h).agent, h.kind) for h in flow.handoffs]


def test_a_single_agent_turn_has_one_run_and_no_handoff() -> None:
    b = TraceBuilder()
    b.chat(calls=[("c1", "lookup_order")])
    b.tool("lookup_order", {"order_id": "A1"})
    flow = handoff_flow(b.build())
    assert flow.agents == ["support-agent"] and flow.handoffs == ()
    assert flow.agent_path() == ["support-agent"]
    assert {flow.agent_of(s) for s in b.spans} == {"support-agent"}


def test_a_trace_without_agents_has_no_runs() -> None:
    span = Span("t", "a" * 32, "1" * 16, "", "GET /", "Server", 1, 2)
    assert handoff_flow(Trace("t", "a" * 32, [span])).runs == ()


def test_a_nested_sub_agent_is_a_delegation_and_owns_its_spans() -> None:
    b = TraceBuilder(agent="triage")
    first = b.tool("get_account", {"customer_id": "c1"})
    with b.inside(b.agent("billing")):
        second = b.tool("change_plan", {"customer_id": "c1", "plan": "basic"})
    after = b.chat(text="Done.")
    flow = handoff_flow(b.build())
    assert summary(b.build()) == [("triage", "billing", "delegation")]
    assert [flow.agent_of(s) for s in (first, second, after)] == ["triage", "billing", "triage"]
    assert flow.agent_path() == ["triage", "billing"]
    assert flow.runs[1].parent == 0


def test_openinference_handoff_spans_are_transfers_carried_by_the_handoff_span() -> None:
    """The OpenAI Agents SDK under OpenInference: an unnamed workflow AGENT span, the
    triage and billing AGENT spans beside each other, `handoff to billing` in triage's."""
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        b.chat(calls=[("h1", "transfer_to_billing")])
        shown = b.handoff("billing")
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": "c1"})
    with b.inside(b.agent("triage")):
        back = b.handoff("billing")
    with b.inside(b.agent("billing")):
        pass
    trace = b.build()
    flow = handoff_flow(trace)
    assert summary(trace) == [
        ("triage", "billing", "transfer"),
        ("billing", "triage", "transfer"),
        ("triage", "billing", "transfer"),
    ]
    assert flow.handoffs[0].span is shown and flow.handoffs[0].call is shown
    assert flow.handoffs[2].span is back
    assert flow.handoffs[1].call is None  # no handoff span: the sequence shows it
    assert flow.agent_path() == ["triage", "billing", "triage", "billing"]
    assert flow.agent_of(b.root) == ""


def test_the_handoff_tool_call_is_what_the_handoff_carried() -> None:
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    with b.inside(b.agent("triage")):
        call = b.tool("transfer_to_billing", {"customer_id": "c1"})
    with b.inside(b.agent("billing")):
        b.tool("get_account", {"customer_id": "c1"})
    flow = handoff_flow(b.build())
    assert [(h.kind, h.call) for h in flow.handoffs] == [("transfer", call)]


def test_sequential_runs_of_one_agent_are_no_handoff_but_a_wrapper_is_one_run() -> None:
    b = TraceBuilder(agent="")
    b.root.genai.agent_name = ""
    # the second: a framework's inner span of the same agent, inside the first
    with b.inside(b.agent("writer")), b.inside(b.agent("writer")):
        b.chat(text="draft")
    with b.inside(b.agent("writer")):
        b.chat(text="final")
    flow = handoff_flow(b.build())
    assert [run.agent for run in flow.runs] == ["writer", "writer"]
    assert flow.handoffs == ()


def node_span(trace_id: str, span_id: str, parent: str, node: str, start: int) -> Span:
    """A LangGraph node span as OpenInference writes it."""
    metadata = json.dumps({"langgraph_node": node, "langgraph_step": 1})
    return Span(
        "t", trace_id, span_id, parent, node, "Internal", start, start + 10,
        attributes={genai.OI_METADATA: metadata, genai.OI_SPAN_KIND: "CHAIN"},
        genai=GenAIFields(operation="chain"),
    )  # fmt: skip


def model_span(trace_id: str, span_id: str, parent: str, start: int) -> Span:
    return Span("t", trace_id, span_id, parent, "ChatOpenAI", "Internal", start, start + 1,
                genai=GenAIFields(operation="chat"))  # fmt: skip


def tool_span(trace_id: str, span_id: str, parent: str, start: int) -> Span:
    return Span("t", trace_id, span_id, parent, "get_account", "Internal", start, start + 1,
                genai=GenAIFields(operation="execute_tool", tool_name="get_account"))  # fmt: skip


def test_langgraph_nodes_that_call_a_model_are_agents_and_a_tools_node_is_their_work() -> None:
    t = "b" * 32
    root = Span("t", t, "0" * 16, "", "LangGraph", "Internal", 0, 100,
                genai=GenAIFields(operation="chain"))  # fmt: skip
    spans = [
        root,
        node_span(t, "1" * 16, root.span_id, "triage", 10),
        model_span(t, "2" * 16, "1" * 16, 11),
        node_span(t, "3" * 16, root.span_id, "tools", 20),
        tool_span(t, "4" * 16, "3" * 16, 21),
        node_span(t, "5" * 16, root.span_id, "billing", 30),
        model_span(t, "6" * 16, "5" * 16, 31),
        node_span(t, "7" * 16, root.span_id, "tools", 40),
        tool_span(t, "8" * 16, "7" * 16, 41),
        node_span(t, "9" * 16, root.span_id, "billing", 50),
        model_span(t, "a" * 16, "9" * 16, 51),
    ]
    trace = Trace("t", t, spans)
    flow = handoff_flow(trace)
    assert [run.agent for run in flow.runs] == ["triage", "billing", "billing"]
    assert summary(trace) == [("triage", "billing", "transfer")]
    by_id = {s.span_id: s for s in spans}
    assert flow.agent_of(by_id["4" * 16]) == "triage"
    assert flow.agent_of(by_id["8" * 16]) == "billing"
    assert flow.agent_of(root) == ""


def test_a_parent_cycle_does_not_hang_the_walk() -> None:
    t = "c" * 32
    a = Span("t", t, "1" * 16, "2" * 16, "invoke_agent a", "Internal", 1, 2,
             genai=GenAIFields(operation="invoke_agent", agent_name="a"))  # fmt: skip
    b = Span("t", t, "2" * 16, "1" * 16, "invoke_agent b", "Internal", 3, 4,
             genai=GenAIFields(operation="invoke_agent", agent_name="b"))  # fmt: skip
    assert handoff_flow(Trace("t", t, [a, b])).runs == ()


def test_openllmetry_graph_nodes_inside_the_graphs_agent_span_hand_off_to_each_other() -> None:
    """OpenLLMetry: `invoke_agent support` > `support.workflow` (the same agent) > the
    node spans (`execute_task triage`, ...), the graph's agent run around them."""
    t = "d" * 32

    def span(span_id: str, parent: str, name: str, start: int, **fields: str) -> Span:
        node = fields.pop("node", "")
        attributes = {genai.TL_LANGGRAPH_NODE: node, genai.TASK_NAME: node} if node else {}
        parent_id = parent * 16 if parent else ""
        return Span(
            "t", t, span_id * 16, parent_id, name, "Internal", start, start + 10,
            attributes=attributes, genai=GenAIFields(**fields),
        )  # fmt: skip

    spans = [
        span("1", "", "invoke_agent support", 0, operation="invoke_agent", agent_name="support"),
        span("2", "1", "support.workflow", 1, operation="invoke_agent", agent_name="support"),
        span("3", "2", "execute_task triage", 2, operation="execute_task", node="triage"),
        span("4", "3", "ChatOpenAI.chat", 3, operation="chat"),
        span(
            "5",
            "3",
            "execute_tool transfer_to_billing",
            4,
            operation="execute_tool",
            tool_name="transfer_to_billing",
        ),
        span("6", "2", "execute_task tools", 5, operation="execute_task", node="tools"),
        span(
            "7",
            "6",
            "execute_tool get_account",
            6,
            operation="execute_tool",
            tool_name="get_account",
        ),
        span("8", "2", "execute_task billing", 7, operation="execute_task", node="billing"),
        span("9", "8", "ChatOpenAI.chat", 8, operation="chat"),
    ]
    trace = Trace("t", t, spans)
    flow = handoff_flow(trace)
    assert [(run.agent, run.node) for run in flow.runs] == [
        ("support", False), ("triage", True), ("billing", True),
    ]  # fmt: skip
    assert summary(trace) == [("triage", "billing", "transfer")]
    assert flow.handoffs[0].call is spans[4]
    assert flow.agent_of(spans[6]) == "triage"  # the tools node: triage's work
    assert flow.agent_of(spans[1]) == "support"


_KINDS = {
    "agent a": GenAIFields(operation="invoke_agent", agent_name="a"),
    "agent b": GenAIFields(operation="invoke_agent", agent_name="b"),
    "chat": GenAIFields(operation="chat"),
    "execute_tool lookup": GenAIFields(operation="execute_tool", tool_name="lookup"),
    "handoff to b": GenAIFields(),
    "GET /": GenAIFields(),
}


@st.composite
def small_traces(draw: st.DrawFn) -> Trace:
    """Up to 8 spans of any kind, each hanging from another (cycles too), a missing span
    or nothing; ids may repeat."""
    t = "e" * 32
    size = draw(st.integers(1, 8))
    spans = []
    for n in range(size):
        name = draw(st.sampled_from(sorted(_KINDS)))
        parent = draw(st.sampled_from(["", "f" * 16, *(f"{m:016x}" for m in range(size))]))
        span_id = f"{draw(st.integers(0, size - 1)) if draw(st.booleans()) else n:016x}"
        fields = _KINDS[name]
        genai_fields = GenAIFields(fields.operation, agent_name=fields.agent_name,
                                   tool_name=fields.tool_name)  # fmt: skip
        start = draw(st.integers(0, 5))
        spans.append(Span("t", t, span_id, parent, name, "Internal", start, start + 1,
                          genai=genai_fields))  # fmt: skip
    return Trace("t", t, spans)


@settings(max_examples=300, deadline=None)
@given(small_traces())
def test_the_one_run_shortcut_finds_what_the_full_reading_finds(trace: Trace) -> None:
    """A turn with one agent span and nothing else that makes a run or a hand-off is read
    without the full walk (most turns); whatever the shape, the flow is the same."""
    assert handoff_flow(trace) == _flow(trace.spans, {s.span_id: s for s in trace.spans})
