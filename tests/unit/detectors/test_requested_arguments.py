"""A tool call whose span does not name its arguments (OpenInference's LangChain tool span
holds a one-argument tool's bare value; some spans hold none) is read by the arguments of
the call the model requested, which the collector fingerprints in the model span's output
facts: PG112 decides on default privacy (facts only), PG108 compares the attempts."""

from __future__ import annotations

import pytest
from pathgrade.detectors.view import DetectorContext, TraceView
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span, Trace

from tests.support.privacy import KEY, facts_only
from tests.support.traces import TraceBuilder, detect

SHAPES = {"facts only": facts_only, "captured": lambda trace: trace}
"""Default settings (the facts the collector computes, no content), and capture on."""


def bare(span: Span, value: str) -> Span:
    """`span` holding its tool's one argument as a bare value (OpenInference's LangChain
    `input.value`): no argument name."""
    span.genai.tool_arguments = value
    return span


def account_turn(customer: str, call_id: str = "") -> Trace:
    """The session `cust-1` reads `customer`'s account: the model asks for
    get_account(customer_id=customer) as call c1, the tool span holds the bare value."""
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c1", "get_account", {"customer_id": customer})])
    bare(b.tool("get_account", None, call_id=call_id, effect="read"), customer)
    b.chat(text="You are on the Plus plan.")
    return b.build()


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("call_id", ["", "c1"])
def test_pg112_reads_a_bare_argument_by_the_call_the_model_requested(
    shape: str, call_id: str
) -> None:
    other = SHAPES[shape](account_turn("cust-2", call_id))
    (finding,) = detect("PG112", other)
    assert finding.kind == "violation"
    assert finding.details == {"tool": "get_account", "argument": "customer_id"}
    assert finding.span_id == next(s.span_id for s in other.spans if s.name.startswith("exec"))
    assert detect("PG112", SHAPES[shape](account_turn("cust-1", call_id))) == []


def test_on_default_settings_the_requested_arguments_travel_as_fingerprints_only() -> None:
    trace = facts_only(account_turn("cust-2"))
    view = TraceView(trace, DetectorContext().conventions)
    (call,) = view.tool_calls
    assert call.arguments is None
    assert call.argument_fps == {"customer_id": KEY.fingerprint("cust-2")}
    assert "cust-2" not in repr(trace)  # neither the span's value nor the model's output


def test_without_the_requested_calls_arguments_pg112_still_cannot_decide() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c1", "get_account", "not json")])
    bare(b.tool("get_account", None, effect="read"), "cust-2")
    (finding,) = detect("PG112", facts_only(b.build()))
    assert finding.kind == "cannot_decide" and finding.details["missing"] == "tool_arguments"


def test_a_call_id_pairs_a_span_with_its_own_request_whatever_the_order() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(
        calls=[
            ("c1", "get_account", {"customer_id": "cust-1"}),
            ("c2", "get_account", {"customer_id": "cust-2"}),
        ]
    )
    other = b.tool("get_account", None, call_id="c2", effect="read")
    b.tool("get_account", None, call_id="c1", effect="read")
    (finding,) = detect("PG112", facts_only(b.build()))
    assert finding.kind == "violation" and finding.span_id == other.span_id


def test_spans_without_a_call_id_take_the_requests_of_their_tool_in_order() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c1", "get_account", {"customer_id": "cust-1"})])
    bare(b.tool("get_account", None, effect="read"), "cust-1")
    b.chat(calls=[("c2", "search_kb", {"query": "plans"})])
    bare(b.tool("search_kb", None, effect="read"), "plans")
    b.chat(calls=[("c3", "get_account", {"customer_id": "cust-2"})])
    later = bare(b.tool("get_account", None, effect="read"), "cust-2")
    trace = facts_only(b.build())
    (finding,) = detect("PG112", trace)
    assert finding.span_id == later.span_id
    view = TraceView(trace, DetectorContext().conventions)
    assert view.requested_answers == [0, 1, 2]
    assert [c.argument_fps for c in view.tool_calls] == [
        {"customer_id": KEY.fingerprint("cust-1")},
        {"query": KEY.fingerprint("plans")},
        {"customer_id": KEY.fingerprint("cust-2")},
    ]


def test_a_span_that_names_its_arguments_keeps_its_own() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c1", "get_account", {"customer_id": "cust-2"})])
    b.tool("get_account", {"customer_id": "cust-1"}, call_id="c1", effect="read")
    assert detect("PG112", facts_only(b.build())) == []


def test_pg108_compares_retried_writes_by_their_requested_arguments() -> None:
    b = TraceBuilder()
    plan = {"customer_id": "cust-1", "plan": "basic"}
    b.chat(calls=[("c1", "change_plan", plan)])
    b.tool("change_plan", None, effect="write", error="Timeout")
    b.chat(calls=[("c2", "change_plan", plan)])
    write = b.tool("change_plan", None, effect="write")
    (finding,) = detect("PG108", facts_only(b.build()))
    assert finding.kind == "violation" and finding.span_id == write.span_id
    undecided = TraceBuilder()
    for _ in range(2):
        undecided.tool("change_plan", None, effect="write", error="Timeout")
    (gap,) = detect("PG108", facts_only(undecided.build()))
    assert gap.kind == "cannot_decide"


def test_the_request_a_handoff_answers_is_no_tool_calls() -> None:
    b = TraceBuilder()
    b.chat(calls=[("h1", "transfer_to_billing", {}), ("c1", "get_account", {"customer_id": "x"})])
    b.handoff("billing", "triage")
    bare(b.tool("get_account", None, effect="read"), "x")
    view = TraceView(facts_only(b.build()), DetectorContext().conventions)
    assert view.requested_answers == [-1, 0]
    assert view.tool_calls[0].argument_fps == {"customer_id": KEY.fingerprint("x")}


def test_a_request_is_answered_by_a_call_of_its_own_tool_only() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c1", "get_account", {"customer_id": "cust-2"})])
    bare(b.tool("zulu_lookup", None, effect="read"), "q")  # no id; a name sorting after
    bare(b.tool("get_account", None, effect="read"), "cust-2")
    view = TraceView(facts_only(b.build()), DetectorContext().conventions)
    assert view.requested_answers == [1]
    assert view.tool_calls[1].argument_fps == {"customer_id": KEY.fingerprint("cust-2")}


def test_a_request_without_an_id_is_answered_by_no_call() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("", "get_account", {"customer_id": "cust-2"})])
    bare(b.tool("get_account", None, effect="read"), "cust-2")
    view = TraceView(facts_only(b.build()), DetectorContext().conventions)
    assert view.requested_answers == [None]
    assert view.tool_calls[0].argument_fps is None


def test_an_unanswered_request_leaves_the_others_answered() -> None:
    b = TraceBuilder(identity="cust-1")
    b.chat(calls=[("c9", "ping", {}), ("c1", "get_account", {"customer_id": "cust-2"})])
    b.tool("get_account", None, call_id="c1", effect="read")
    view = TraceView(facts_only(b.build()), DetectorContext().conventions)
    assert view.requested_answers == [None, 0]
    assert view.tool_calls[0].argument_fps == {"customer_id": KEY.fingerprint("cust-2")}


def bare_call_turn(customer: str | None) -> Trace:
    """The session `cust-1` calls get_account, whose span records neither arguments nor
    result (an SDK that captures no content) and carries the session identity (as some
    instrumentations put it on every span); with `customer`, the model requested the call
    with that customer_id."""
    b = TraceBuilder(identity="cust-1")
    if customer is not None:
        b.chat(calls=[("c1", "get_account", {"customer_id": customer})])
    b.tool("get_account", None, call_id="c1", effect="read",
           attributes={genai.ENDUSER_ID: "cust-1"})  # fmt: skip
    b.chat(text="You are on the Plus plan.")
    return b.build()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_span_recording_neither_arguments_nor_result_is_read_by_the_requested_call(
    shape: str,
) -> None:
    (finding,) = detect("PG112", SHAPES[shape](bare_call_turn("cust-2")))
    assert finding.kind == "violation"
    assert detect("PG112", SHAPES[shape](bare_call_turn("cust-1"))) == []


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_span_recording_neither_with_no_request_cannot_decide_whatever_facts_it_has(
    shape: str,
) -> None:
    """Nothing says what its arguments were: the facts of its session identity do not
    make it a call without arguments (it was quiet on default privacy)."""
    trace = SHAPES[shape](bare_call_turn(None))
    (finding,) = detect("PG112", trace)
    assert finding.kind == "cannot_decide" and finding.details["missing"] == "tool_arguments"


def test_a_span_recording_its_result_and_no_arguments_is_a_call_without_arguments() -> None:
    """The SDK captured content (the result) and no arguments: on default privacy the
    collector's check of the result says so, and PG112 has nothing to compare."""
    b = TraceBuilder(identity="cust-1")
    b.tool("get_account", None, result="Plus plan", effect="read")
    for shape in SHAPES.values():
        assert detect("PG112", shape(b.build())) == []
