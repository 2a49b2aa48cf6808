"""`content.agent_turns`: the turns of a trace (outermost agent span of a service, else
entry spans), their spans and context, and the convention mapping's agent entries and
handoffs."""

from __future__ import annotations

import json
from typing import Any

from pathgrade.content.agent_turns import turn_at, turn_layout, turns_of
from pathgrade.content.conventions import genai_fields, handoff_tool_names, is_agent_entry
from pathgrade.schemas.model import Span, Trace

from tests.support.traces import LOCAL_PARENT, REMOTE_PARENT


def span(
    span_id: str, parent: str = "", name: str = "s", attributes: dict[str, Any] | None = None,
    *, service: str = "app", start: int = 0, flags: int = 0,
) -> Span:  # fmt: skip
    attributes = attributes or {}
    fields = genai_fields(name, attributes)
    return Span("t", "a" * 32, span_id, parent, name, "Internal", start, start + 10, service,
                attributes=attributes, genai=fields, flags=flags)  # fmt: skip


def agent(span_id: str, parent: str = "", **kw: Any) -> Span:
    return span(span_id, parent, "invoke_agent support", {"gen_ai.operation.name": "invoke_agent"},
                **kw)  # fmt: skip


def ids(spans: list[Span]) -> list[str]:
    return sorted(s.span_id for s in spans)


def test_the_agent_not_the_server_span_tops_the_turn() -> None:
    chat = span("chat", "ag", "chat gpt-4o", {"gen_ai.operation.name": "chat"}, start=3)
    spans = [span("srv", "gw", "POST /chat", flags=REMOTE_PARENT),
             span("auth", "srv", start=1), agent("ag", "srv", start=2), chat]  # fmt: skip
    (turn,) = turn_layout(spans).turns
    assert turn.top.span_id == "ag" and ids(turn.spans) == ["ag", "chat"]
    assert [s.span_id for s in turn.context] == ["srv"] and turn.own_context == 1
    assert turn.boundary.span_id == "srv"
    assert turn_layout(spans).loose == {}  # the middleware span belongs to no turn


def test_nested_agents_of_a_service_are_one_turn_another_service_s_its_own() -> None:
    spans = [agent("outer"), agent("inner", "outer", start=1),
             span("client", "inner", "POST /rates", start=2),
             agent("remote", "client", service="rates", start=3, flags=REMOTE_PARENT),
             span("tool", "remote", "execute_tool quote", service="rates", start=4)]  # fmt: skip
    turns = turn_layout(spans).turns
    assert [t.top.span_id for t in turns] == ["outer", "remote"]
    assert ids(turns[0].spans) == ["client", "inner", "outer"]
    assert ids(turns[1].spans) == ["remote", "tool"]
    assert [s.span_id for s in turns[1].context] == ["client", "inner", "outer"]


def test_several_agent_runs_and_a_session_span_enclosing_them() -> None:
    spans = [span("session"), *(agent(f"run{n}", "session", start=n * 10) for n in (1, 2, 3))]
    turns = turn_layout(spans).turns
    assert [t.top.span_id for t in turns] == ["run1", "run2", "run3"]
    assert all(t.own_context == 0 and t.context[0].span_id == "session" for t in turns)


CHAT = {"gen_ai.operation.name": "chat"}


def test_without_an_agent_the_entry_spans_top_the_turns() -> None:
    frontend = [span("root"), span("call", "root", "chat m", CHAT, start=1)]
    backend = [span("srv", "call", "GET /x", service="api", start=2, flags=REMOTE_PARENT),
               span("llm", "srv", "chat m", CHAT, service="api", start=3)]  # fmt: skip
    turns = turn_layout(frontend + backend).turns
    assert [(t.top.span_id, ids(t.spans)) for t in turns] == [
        ("root", ["call", "root"]), ("srv", ["llm", "srv"])]  # fmt: skip
    orphans = [span("c1", "missing", flags=LOCAL_PARENT, start=5),
               span("c2", "missing", "chat m", CHAT, flags=LOCAL_PARENT, start=6)]  # fmt: skip
    (joined,) = turn_layout(orphans).turns  # one missing span: one turn until it comes
    assert joined.top.span_id == "c1" and ids(joined.spans) == ["c1", "c2"]


def test_a_trace_without_a_genai_operation_is_no_turn() -> None:
    health = [span("srv", "gw", "GET /health", flags=REMOTE_PARENT), span("db", "srv", start=1)]
    assert turn_layout(health).turns == [] and turns_of(Trace("t", "a" * 32, health)) == []
    frontend = [span("root"), span("call", "root", start=1)]  # no model, tool or agent call
    backend = [span("srv", "call", "POST /ask", service="api", start=2, flags=REMOTE_PARENT),
               span("llm", "srv", "chat m", CHAT, service="api", start=3)]  # fmt: skip
    (turn,) = turn_layout(frontend + backend).turns
    assert turn.top.span_id == "srv" and ids(turn.spans) == ["llm", "srv"]


def test_loose_genai_spans_of_a_trace_with_agents_wait_as_pieces_of_a_turn() -> None:
    chat = span("chat", "lost", "chat m", {"gen_ai.operation.name": "chat"}, start=20,
                flags=LOCAL_PARENT)  # fmt: skip
    http = span("http", "lost", start=20, flags=LOCAL_PARENT)
    layout = turn_layout([agent("ag"), chat, http])
    assert [t.top.span_id for t in layout.turns] == ["ag"]
    ((boundary, spans),) = layout.loose.values()
    assert boundary.span_id == "chat" and ids(spans) == ["chat"]  # GenAI spans only


def test_spans_hanging_from_a_missing_span_while_an_agent_ran_are_its_turn_s() -> None:
    """AutoGen under OpenInference: the instrumentor's model and tool spans hang from an
    agent span that is never exported; the framework's own agent span ran around them."""
    runs = [agent("run1", "srv", start=0), agent("run2", "srv", start=20)]
    for run in runs:
        run.end_ns = run.start_ns + 15
    chat = span("chat", "lost1", "chat m", {"gen_ai.operation.name": "chat"}, start=21,
                flags=LOCAL_PARENT)  # fmt: skip
    tool = span("tool", "chat", "execute_tool x", {"gen_ai.operation.name": "execute_tool"},
                start=22, flags=LOCAL_PARENT)  # fmt: skip
    chat.end_ns = 34
    other = span("other", "lost2", "chat m", {"gen_ai.operation.name": "chat"}, start=21,
                 service="billing", flags=LOCAL_PARENT)  # fmt: skip
    remote = span("far", "gw", "chat m", {"gen_ai.operation.name": "chat"}, start=21,
                  flags=REMOTE_PARENT)  # fmt: skip
    layout = turn_layout([span("srv", "gw", flags=REMOTE_PARENT), *runs, chat, tool, other,
                          remote])  # fmt: skip
    assert [ids(t.spans) for t in layout.turns] == [["run1"], ["chat", "run2", "tool"]]
    assert sorted(b.span_id for b, _ in layout.loose.values()) == ["far", "other"]


def test_the_convention_mapping_s_agent_entries() -> None:
    langgraph_root = {"openinference.span.kind": "CHAIN",
                      "metadata": json.dumps({"ls_integration": "langgraph"})}  # fmt: skip
    node_metadata = json.dumps({"ls_integration": "langgraph", "langgraph_node": "a"})
    node = {"openinference.span.kind": "CHAIN", "metadata": node_metadata}
    cases = [
        ("invoke_agent x", {}, True), ("y", {"gen_ai.operation.name": "invoke_workflow"}, True),
        ("handle_conversation_turn", {}, True),
        ("Agent workflow", {"openinference.span.kind": "AGENT"}, True),
        ("LangGraph", langgraph_root, True), ("a", node, False),
        ("RunnableSequence", {"openinference.span.kind": "CHAIN"}, False),
        ("LangGraph.workflow", {"traceloop.span.kind": "workflow"}, True),
        ("POST /chat", {}, False), ("chat gpt-4o", {}, False),
        ("agent run", {"agent_name": "support"}, True),  # Pydantic AI, version 2
        ("FunctionAgent.run", {"openinference.span.kind": "CHAIN"}, True),  # LlamaIndex
        ("AgentWorkflow.run", {"openinference.span.kind": "CHAIN"}, True),
        ("BaseWorkflowAgent.run_agent_step", {"openinference.span.kind": "CHAIN"}, False),
        ("FunctionAgent.run", {}, False), ("Workflow.run", {"openinference.span.kind": "CHAIN"},
                                           False),
    ]  # fmt: skip
    found = [is_agent_entry(n, genai_fields(n, attrs).operation, attrs) for n, attrs, _ in cases]
    assert found == [want for _, _, want in cases]


def test_a_langgraph_graph_under_openinference_is_one_turn() -> None:
    metadata = {"ls_integration": "langgraph"}
    root = span("graph", "", "LangGraph", {"openinference.span.kind": "CHAIN",
                                           "metadata": json.dumps(metadata)})  # fmt: skip
    nodes = [
        span(n, "graph", n, {"openinference.span.kind": "CHAIN",
                             "metadata": json.dumps({**metadata, "langgraph_node": n})}, start=i)
        for i, n in enumerate(("greet", "book"))
    ]  # fmt: skip
    (turn,) = turns_of(Trace("t", "a" * 32, [root, *nodes]))
    assert turn.root.span_id == "graph" and len(turn.spans) == 3  # type: ignore[union-attr]


def test_handoff_spans_answer_the_tool_the_sdk_names_for_them() -> None:
    assert handoff_tool_names("handoff to Billing agent") == ("transfer_to_billing_agent",)
    assert handoff_tool_names("handoff to billing") == ("transfer_to_billing",)
    assert handoff_tool_names("handoff to ") == () and handoff_tool_names("lookup") == ()


def test_turn_at_cuts_the_sampled_turn_out_of_a_stored_trace() -> None:
    spans = [span("session"), agent("run1", "session", start=1), agent("run2", "session", start=2)]
    trace = Trace("t", "a" * 32, spans)
    assert turn_at(trace, "run2").top_span_id == "run2"
    assert turn_at(trace, "") is trace and turn_at(trace, "gone") is trace
