"""The span view at its edges: a custom identity attribute read as configured (also on one
span), a call compared with no identity known, a call the collector saw without
arguments, the decisions a shared span records while the turn runs, a call read from the
span that knows its arguments (else its first), a tool span inside another tool's, the
digest of an empty turn, and the view built once per trace."""

from __future__ import annotations

import json

import pytest
from pathgrade.detectors.conventions import Conventions, IdentityConfig
from pathgrade.detectors.view import DetectorContext, TraceView, turn_digest
from pathgrade.schemas import facts, genai
from pathgrade.schemas.model import Span, Trace

from tests.support.privacy import KEY, facts_only
from tests.support.traces import TraceBuilder, decision


@pytest.mark.parametrize("attribute", ["account.id", "x.customer"])  # before, after enduser.id
def test_a_custom_identity_attribute_is_read_as_configured(attribute: str) -> None:
    b = TraceBuilder(identity=None)
    b.root.attributes.update({attribute: "cust-1", "enduser.id": "cust-9"})
    conventions = Conventions(identity=IdentityConfig(attribute=attribute))
    assert TraceView(b.build(), conventions).session_identity == "cust-1"


@pytest.mark.parametrize("attribute", ["account.id", "x.customer"])  # before, after enduser.id
def test_a_span_s_identity_is_read_from_the_configured_attribute(attribute: str) -> None:
    b = TraceBuilder(identity=None)
    b.root.attributes.update({attribute: "cust-1", "user.id": "cust-9"})
    span = facts_only(b.build(), scrub=True).spans[0]
    assert span.facts.session  # the collector's fingerprint of user.id
    conventions = Conventions(identity=IdentityConfig(attribute=attribute))
    assert TraceView(Trace("t", "9" * 32, [span]), conventions).identity_of(span) == "cust-1"


@pytest.mark.parametrize("attribute", ["account.id", "x.customer"])
def test_a_custom_identity_attribute_has_no_fingerprint(attribute: str) -> None:
    b = TraceBuilder()  # enduser.id cust-1: the collector fingerprints it
    trace = facts_only(b.build())
    custom = Conventions(identity=IdentityConfig(attribute=attribute))
    assert TraceView(trace, Conventions()).session_fingerprint != ""
    assert TraceView(trace, custom).session_fingerprint == ""


def test_a_captured_argument_is_compared_when_only_the_session_has_a_fingerprint() -> None:
    b = TraceBuilder()  # enduser.id cust-1, captured
    b.tool("lookup_order", {"customer_id": "cust-2"})  # captured, no facts
    fingerprinted = facts_only(b.build(), scrub=True).spans[0]
    b.root.attributes[facts.SESSION_FP] = fingerprinted.facts.session
    view = TraceView(b.build(), Conventions())
    (call,) = view.tool_calls
    assert view.session_fingerprint and call.argument_fps is None
    assert view.is_session(call, "customer_id") is False


def test_a_span_s_identity_is_by_default_its_fingerprint_else_any_identity_key() -> None:
    b = TraceBuilder(identity=None)
    b.root.attributes["user.id"] = "cust-1"
    view = TraceView(b.build(), Conventions())
    assert view.identity_of(b.root) == "cust-1"  # no facts: user.id read as enduser.id
    seen = facts_only(b.build(), scrub=True).spans[0]
    assert view.identity_of(seen) == seen.facts.session != ""


def test_without_a_session_identity_a_call_cannot_be_compared() -> None:
    b = TraceBuilder(identity=None)
    call = b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
    view = TraceView(b.build(), Conventions())
    (tool_call,) = [c for c in view.tool_calls if c.span is call]
    assert view.is_session(tool_call, "account_id") is None


@pytest.mark.parametrize("version", [1, 3])
def test_a_call_the_collector_saw_without_arguments_has_its_arguments_known(version: int) -> None:
    """On default settings a tool span with facts (of any contract version) and no
    argument facts is a call without arguments, not one whose arguments were dropped."""
    b = TraceBuilder()
    b.tool("ping", None, result="pong")  # no arguments; its result gives it facts
    trace = facts_only(b.build())
    trace.spans[-1].attributes[facts.VERSION] = version
    (call,) = TraceView(trace, Conventions()).tool_calls
    assert call.arguments_known and not call.names_arguments
    unseen = TraceBuilder()
    unseen.tool("ping", None)  # no facts at all: nothing says what its arguments were
    (call,) = TraceView(unseen.build(), Conventions()).tool_calls
    assert not call.arguments_known


def test_decisions_on_a_shared_span_count_while_the_top_span_runs_ends_included() -> None:
    b = TraceBuilder()
    b.tool("cancel_order", {"order_id": "A"}, call_id="c1", effect="irreversible")
    turn = b.build()
    top = b.root
    shared = Span(
        tenant="default", trace_id=turn.trace_id, span_id="5e" * 8, parent_span_id="",
        name="session", kind="Server", start_ns=top.start_ns - 50, end_ns=top.end_ns + 50,
    )  # fmt: skip
    times = (top.start_ns - 1, top.start_ns, top.end_ns, top.end_ns + 1)
    for time_ns in times:
        decision(shared, "allow", call_id="c1", at=time_ns)
    trace = Trace(turn.tenant, turn.trace_id, turn.spans, [shared], top.span_id, own_context=0)
    decided = TraceView(trace, Conventions()).tool_call_decisions
    assert [d.time_ns for d in decided] == [top.start_ns, top.end_ns]


def test_a_call_none_of_whose_spans_knows_its_arguments_is_read_from_its_first_span() -> None:
    b = TraceBuilder()
    outer = b.tool("lookup_order", None, call_id="c1", effect="write")
    b.tool("lookup_order", None, call_id="c1")  # the same call, described again
    (call,) = TraceView(facts_only(b.build()), Conventions()).tool_calls
    assert call.span is not outer and call.span.span_id == outer.span_id
    assert call.is_write and len(call.spans) == 2


def test_a_call_is_read_from_the_span_that_knows_its_arguments() -> None:
    b = TraceBuilder()
    b.tool("lookup_order", None, call_id="c1")  # the framework's span: no arguments
    b.tool("lookup_order", {"order_id": "1"}, call_id="c1")  # the instrumentor's
    (call,) = TraceView(facts_only(b.build()), Conventions()).tool_calls
    assert call.argument_fps == {"order_id": KEY.fingerprint("1")}


@pytest.mark.parametrize(("outer", "inner"), [("lookup_order", "search_kb"), ("zulu", "alpha")])
def test_a_tool_span_inside_a_span_of_another_tool_is_a_call_of_its_own(
    outer: str, inner: str
) -> None:
    b = TraceBuilder()
    with b.inside(b.tool(outer, {"q": "1"})):
        b.tool(inner, {"q": "2"})
    view = TraceView(facts_only(b.build()), Conventions())
    assert [c.name for c in view.tool_calls] == [outer, inner]


def test_untrusted_content_is_tool_results_documents_and_model_input_tool_messages() -> None:
    b = TraceBuilder()
    b.root.genai.tool_result = "agent"  # invoke_agent: a tool result here is no tool's
    tool_message = [{"role": "tool", "content": "from a tool"}]
    chat = b.chat(text="Hi.", input_messages=tool_message)
    chat.genai.tool_result = "chat"  # likewise on a model span
    b.tool("search", {"q": "x"}, result="a result")
    b.chat(attributes={genai.RETRIEVAL_DOCUMENTS: "one document"})
    b.chat(attributes={genai.RETRIEVAL_DOCUMENTS: ["a", "list"]})
    agent = b.agent("helper")
    agent.genai.input_messages = json.dumps(tool_message)  # not a model's input
    view = TraceView(b.build(), Conventions())
    assert [u.text for u in view.untrusted_content] == [
        "from a tool",
        "a result",
        "one document",
        str(["a", "list"]),
    ]


def test_the_digest_of_a_turn_without_a_top_span_starts_at_its_first_span() -> None:
    def span(span_id: str, parent: str, start_ns: int) -> Span:
        return Span(
            tenant="default", trace_id="9" * 32, span_id=span_id, parent_span_id=parent,
            name="step", kind="Internal", start_ns=start_ns, end_ns=start_ns + 5,
        )  # fmt: skip

    cycle = Trace("default", "9" * 32, [span("b" * 16, "a" * 16, 30), span("a" * 16, "b" * 16, 10)])
    view = TraceView(cycle, Conventions())
    assert view.top is None
    assert turn_digest(view, "conv").start_ns == 10


def test_the_digest_of_a_turn_without_spans_starts_at_zero() -> None:
    empty = Trace("t", "9" * 32, [])
    assert turn_digest(TraceView(empty, Conventions()), "conv").start_ns == 0


def test_a_context_builds_the_view_of_a_trace_once() -> None:
    context = DetectorContext()
    first, second = TraceBuilder("a" * 32).build(), TraceBuilder("b" * 32).build()
    view = context.view_of(first)
    assert context.view_of(first) is view
    assert context.view_of(second).trace is second
    again = TraceBuilder("b" * 32).build()  # equal to `second`, another object
    assert again == second and context.view_of(again).trace is again
