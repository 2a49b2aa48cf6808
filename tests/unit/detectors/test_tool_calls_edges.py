"""PG104, PG105, PG106 and PG107 at their edges: a call with no schema before one that has
it, the first schema error named, an uncaptured call before a captured one, a value that
is no number, a minimum and a maximum bound, a rule-less call before a ruled one, a
before-tool named by its own name only, a loop reported on the repeated tool among
others, and the repeat limit's lower bound."""

from __future__ import annotations

import pytest
from pathgrade.detectors.tool_calls import LoopParams
from pydantic import ValidationError

from tests.support.traces import TraceBuilder, detect


def test_pg104_a_call_without_a_schema_does_not_end_the_check_of_the_calls_after_it() -> None:
    schema = {"type": "object", "required": ["order_id"]}
    b = TraceBuilder()
    lookup = b.tool("lookup_order", {"order_id": "1"})  # no schema for it
    refund = b.tool("issue_refund", {"amount": 5})
    findings = detect("PG104", b.build(), {"schemas": {"issue_refund": schema}})
    violation, undecided = findings
    assert (violation.kind, violation.span_id) == ("violation", refund.span_id)
    assert (undecided.kind, undecided.details["span_ids"]) == ("cannot_decide", [lookup.span_id])


def test_pg104_names_the_first_schema_error_of_a_call() -> None:
    schema = {"type": "object", "required": ["order_id", "amount"]}
    b = TraceBuilder()
    b.tool("issue_refund", {"note": "x"})  # both required keys missing: two errors
    (finding,) = detect("PG104", b.build(), {"schemas": {"issue_refund": schema}})
    first, second = finding.details["errors"]
    assert first != second
    assert finding.reason == f"Arguments of issue_refund violate its schema: {first}."


def test_pg105_a_value_below_the_minimum_fires_and_one_at_or_above_it_is_quiet() -> None:
    rules = {"tools": {"issue_refund": {"amount": {"minimum": 10}}}}
    b = TraceBuilder()
    b.tool("lookup_order", {"order_id": "1"})  # no rule for it; the calls after still count
    below = b.tool("issue_refund", {"amount": 5})
    b.tool("issue_refund", {"amount": 10})
    b.tool("issue_refund", {"amount": 20})
    findings = detect("PG105", b.build(), rules)
    assert [(f.details["problem"], f.span_id) for f in findings] == [
        ("is below the minimum 10", below.span_id)
    ]


def test_pg105_an_uncaptured_call_does_not_end_the_check_of_the_calls_after_it() -> None:
    rules = {"tools": {"issue_refund": {"amount": {"maximum": 500}}}}
    b = TraceBuilder()
    unseen = b.tool("issue_refund", None)  # arguments neither captured nor recorded
    over = b.tool("issue_refund", {"amount": 900})
    violation, undecided = detect("PG105", b.build(), rules)
    assert (violation.kind, violation.span_id) == ("violation", over.span_id)
    assert (undecided.kind, undecided.details["span_ids"]) == ("cannot_decide", [unseen.span_id])


def test_pg105_a_value_above_the_maximum_fires_and_one_at_or_below_it_is_quiet() -> None:
    rules = {"tools": {"issue_refund": {"amount": {"maximum": 500}}}}
    b = TraceBuilder()
    b.tool("issue_refund", {"amount": 499})
    b.tool("issue_refund", {"amount": 500})
    above = b.tool("issue_refund", {"amount": 501})
    findings = detect("PG105", b.build(), rules)
    assert [(f.details["problem"], f.span_id) for f in findings] == [
        ("is above the maximum 500", above.span_id)
    ]


@pytest.mark.parametrize("bound", [{"minimum": 10}, {"maximum": 500}])
@pytest.mark.parametrize("value", ["900", True, None])
def test_pg105_a_value_that_is_no_number_breaks_a_single_bound(
    bound: dict[str, float], value: object
) -> None:
    b = TraceBuilder()
    b.tool("issue_refund", {"amount": value})
    (finding,) = detect("PG105", b.build(), {"tools": {"issue_refund": {"amount": bound}}})
    assert finding.details["problem"] == "is not a number"


def test_pg106_only_the_named_tool_counts_as_the_one_before() -> None:
    rules = {"rules": [{"before": "lookup_order", "after": "issue_refund"}]}
    b = TraceBuilder()
    b.tool("search_orders", {"q": "1"})  # sorts after lookup_order, but is another tool
    b.tool("issue_refund", {"amount": 5}, effect="write")
    (finding,) = detect("PG106", b.build(), rules)
    assert finding.details == {"before": "lookup_order", "after": "issue_refund"}


def test_pg107_names_the_repeated_tool_and_its_first_call_beyond_the_limit() -> None:
    b = TraceBuilder()
    for name in ("alpha", "bravo", "charlie", "delta", "echo"):
        b.tool(name, {"x": name})
    repeated = [b.tool("lookup_order", {"order_id": "1"}) for _ in range(3)]
    (finding,) = detect("PG107", b.build(), {"max_repeats": 2})
    assert finding.details["tool"] == "lookup_order" and finding.details["count"] == 3
    assert finding.span_id == repeated[2].span_id
    assert finding.reason.startswith("lookup_order was called 3 times")


def test_pg107_counts_the_calls_of_the_repeated_signature_only() -> None:
    b = TraceBuilder()
    b.tool("zulu_search", {"q": "router"})  # its signature sorts after the repeated one
    repeated = [b.tool("lookup_order", {"order_id": "1"}) for _ in range(3)]
    (finding,) = detect("PG107", b.build(), {"max_repeats": 2})
    assert (finding.details["tool"], finding.span_id) == ("lookup_order", repeated[2].span_id)
    assert finding.reason.startswith("lookup_order was called 3 times")


def test_pg107_the_repeat_limit_is_one_or_more() -> None:
    assert LoopParams(max_repeats=1).max_repeats == 1
    with pytest.raises(ValidationError, match="max_repeats"):
        LoopParams(max_repeats=0)
