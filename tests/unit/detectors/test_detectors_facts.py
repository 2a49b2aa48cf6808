"""Detectors decide on facts: every fixture's findings are the same when the trace carries
only what the collector records (no argument, result or message) as when its content
was captured; fingerprints keep values apart that scrubbing would make look alike; a
rule that raises does not silence the others."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from pathgrade.detectors import REGISTRY, default_policy, run_detectors
from pathgrade.detectors.registry import DETECTOR_ERROR
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace

from tests.support.privacy import facts_only
from tests.support.traces import TraceBuilder, clean_refund_trace, detect
from tests.unit.detectors.test_detectors_sdk import CLEAN, FAILURES, record


def verdicts(trace: Trace) -> list[tuple[str, str, str]]:
    findings = run_detectors(trace, default_policy().resolve())
    return sorted((f.code, f.kind, f.span_id) for f in findings)


def loop_trace() -> Trace:
    b = TraceBuilder(answer="Nothing found.")
    for _ in range(4):
        b.tool("search", {"q": "router", "idempotency_key": "same"}, effect="read")
    return b.build()


def claim_and_card_trace() -> Trace:
    b = TraceBuilder(answer="I have refunded 4111 1111 1111 1111 and mailed ann@example.com.")
    b.tool("lookup_order", {"order_id": "1"}, effect="read")
    return b.build()


def confirmation_trace(confirmed: dict[str, Any], called: dict[str, Any]) -> Trace:
    action = json.dumps({"name": "reset_equipment", "arguments": confirmed})
    b = TraceBuilder(root_attributes={genai.PG_CONFIRMED_ACTION: action})
    b.tool("reset_equipment", called, effect="irreversible")
    return b.build()


FIXTURES = {
    **{f"sdk failure {code}": (lambda c=code: record(FAILURES[c])) for code in FAILURES},
    **{f"sdk clean {name}": (lambda n=name: record(CLEAN[n])) for name in CLEAN},
    "clean refund": clean_refund_trace,
    "loop": loop_trace,
    "claim and card": claim_and_card_trace,
    "confirmed": lambda: confirmation_trace({"device": "router"}, {"device": "router"}),
    "confirmation differs": lambda: confirmation_trace({"device": "router"}, {"device": "modem"}),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_findings_on_facts_alone_equal_the_findings_on_captured_content(name: str) -> None:
    trace = FIXTURES[name]()
    assert verdicts(facts_only(trace)) == verdicts(trace)
    assert verdicts(facts_only(trace, scrub=True)) == verdicts(trace)


def test_the_fixtures_exercise_the_fact_checks() -> None:
    fired = {code for make in FIXTURES.values() for code, kind, _ in verdicts(facts_only(make()))
             if kind == "violation"}  # fmt: skip
    assert {"PG107", "PG108", "PG110", "PG111", "PG112", "PG115", "PG116", "PG117"} <= fired


def test_fingerprints_tell_apart_what_scrubbing_makes_alike() -> None:
    """Capture on: two different e-mail arguments both forward as [REDACTED:email]; by
    value they would be a loop and a retry, by fingerprint they are not. The session's
    e-mail identity matches only its own account."""
    b = TraceBuilder(identity="ann@example.com")
    for address in ("ann@example.com", "bob@example.com", "cy@example.com", "di@example.com"):
        b.tool("send_receipt", {"customer_id": address}, effect="write", idempotency_key="k")
    captured = facts_only(b.build(), scrub=True)
    assert {json.loads(s.genai.tool_arguments or "{}").get("customer_id") for s in
            captured.spans[1:]} == {"[REDACTED:email]"}  # fmt: skip
    codes = Counter(code for code, kind, _ in verdicts(captured) if kind == "violation")
    assert codes["PG107"] == 0 and codes["PG108"] == 0
    assert codes["PG112"] == 3  # bob, cy and di are other accounts, told apart unseen
    assert codes["PG109"] == 1  # four distinct writes


def test_schema_checks_run_on_the_skeleton_and_value_keywords_are_a_gap() -> None:
    schema = {"type": "object", "required": ["order_id"], "additionalProperties": False,
              "properties": {"order_id": {"type": "string", "maxLength": 8}}}  # fmt: skip
    b = TraceBuilder()
    b.tool("lookup_order", {"order_id": "A" * 12, "extra": 1})
    (violation,) = detect("PG104", facts_only(b.build()), {"schemas": {"lookup_order": schema}})
    assert violation.kind == "violation" and len(violation.details["errors"]) == 2
    enum = {"type": "object", "properties": {"plan": {"enum": ["basic", "gold"]}}}
    b = TraceBuilder()
    b.tool("change_plan", {"plan": "gold"})
    (gap,) = detect("PG104", facts_only(b.build()), {"schemas": {"change_plan": enum}})
    assert gap.kind == "cannot_decide" and "change_plan" in gap.details["close"]


def test_bounds_need_the_value_a_gap_closed_by_capturing_the_tool() -> None:
    rules = {"tools": {"issue_refund": {"amount": {"maximum": 500}}}}
    b = TraceBuilder()
    b.tool("issue_refund", {"amount": 900})
    (gap,) = detect("PG105", facts_only(b.build()), rules)
    assert gap.kind == "cannot_decide" and gap.details["missing"] == "tool_arguments"
    assert "issue_refund" in gap.details["close"] and "capture" in gap.details["close"]
    b = TraceBuilder()
    b.tool("issue_refund", {"reason": "late"})  # the governed argument is not in the call
    assert detect("PG105", facts_only(b.build()), rules) == []


def test_a_rule_that_raises_is_counted_and_undecided_and_the_others_keep_their_findings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_: Any) -> list:
        raise KeyError("customer 42")

    monkeypatch.setattr(REGISTRY["PG107"], "function", broken)
    trace = record(FAILURES["PG112"])
    errors: Counter[str] = Counter()
    findings = run_detectors(trace, default_policy().resolve(), errors=errors)
    assert errors == Counter({"PG107": 1})
    (undecided,) = [f for f in findings if f.code == "PG107"]
    assert undecided.kind == "cannot_decide" and undecided.details["missing"] == DETECTOR_ERROR
    assert "customer 42" not in undecided.reason  # the exception's text may hold content
    assert "PG112" in {f.code for f in findings if f.kind == "violation"}


def test_a_final_answer_asked_for_as_a_tool_call_is_the_answer() -> None:
    """smolagents: the model calls `final_answer` with the answer: the run ended cleanly,
    a card in it is a card in the answer, and no span need answer that call (captured or
    on the collector's facts alike)."""
    b = TraceBuilder(answer=None)
    b.chat(calls=[("c1", "lookup_order")])
    b.tool("lookup_order", {"order_id": "1"}, call_id="c1")
    final = b.chat()
    answer = {"answer": "I have reset your router; the card on file is 4111 1111 1111 1111."}
    call = {"type": "tool_call", "id": "c2", "name": "final_answer", "arguments": answer}
    final.genai.output_messages = json.dumps([{"role": "assistant", "parts": [call]}])
    for trace in (b.build(), facts_only(b.build())):
        assert detect("PG113", trace) == [] and detect("PG100", trace) == []
        (card,) = detect("PG115", trace)
        assert card.details["kind"] == "card"
        (claim,) = detect("PG116", trace)  # "I have reset": no reset tool ran
        assert claim.details["claim"] == "reset"
