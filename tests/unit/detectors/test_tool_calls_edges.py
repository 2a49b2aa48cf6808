"""PG105, PG106 and PG107 at their edges: a minimum bound, a rule-less call before a
ruled one, a before-tool named by its own name only, and a loop reported on the
repeated tool among others."""

from __future__ import annotations

from tests.support.traces import TraceBuilder, detect


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
