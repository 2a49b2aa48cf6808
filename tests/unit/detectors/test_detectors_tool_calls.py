"""PG102 forbidden, PG103 required, PG104 schema, PG105 allowed values, PG106 ordering,
PG107 loop signature, and the JSON Schema subset validator."""

from __future__ import annotations

import json

from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.jsonschema_subset import validate
from pathgrade.detectors.view import TraceView
from pathgrade.schemas import genai

from tests.support.traces import (
    TraceBuilder,
    clean_refund_trace,
    detect,
    history_of,
)

REFUND_SCHEMA = {
    "type": "object",
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string", "pattern": r"^ORD-\d{6}$"},
        "amount": {"type": "number", "minimum": 0, "maximum": 500},
        "reason": {"enum": ["damaged", "late"]},
        "customer_id": {"type": "string"},
    },
    "additionalProperties": False,
}


def test_pg102_fires_on_forbidden_tool_only() -> None:
    trace = clean_refund_trace()
    assert detect("PG102", trace) == []
    (finding,) = detect("PG102", trace, {"tools": ["issue_refund", "drop_table"]})
    assert finding.details == {"tool": "issue_refund"}


def test_pg103_fires_per_missing_required_tool() -> None:
    trace = clean_refund_trace()
    assert detect("PG103", trace, {"tools": ["lookup_order"]}) == []
    findings = detect("PG103", trace, {"tools": ["lookup_order", "verify_identity"]})
    assert [f.details["tool"] for f in findings] == ["verify_identity"]
    assert findings[0].span_id == trace.root.span_id  # type: ignore[union-attr]


def test_pg104_validates_against_policy_schema() -> None:
    b = TraceBuilder()
    b.tool("issue_refund", {"order_id": "ORD-12", "amount": 900, "extra": 1})
    (finding,) = detect("PG104", b.build(), {"schemas": {"issue_refund": REFUND_SCHEMA}})
    assert sorted(finding.details["errors"]) == [
        "$.amount: 900 is greater than 500",
        "$.order_id: 'ORD-12' does not match '^ORD-\\\\d{6}$'",
        "$: unexpected property 'extra'",
    ]
    good = TraceBuilder()
    good.tool("issue_refund", {"order_id": "ORD-123456", "amount": 20})
    assert detect("PG104", good.build(), {"schemas": {"issue_refund": REFUND_SCHEMA}}) == []


def test_pg104_reads_tool_definitions_and_cannot_decide_without_schema_or_arguments() -> None:
    definitions = [{"type": "function", "name": "issue_refund", "parameters": REFUND_SCHEMA}]
    b = TraceBuilder()
    b.chat(attributes={genai.TOOL_DEFINITIONS: json.dumps(definitions)})
    b.tool("issue_refund", {"order_id": "ORD-123456"})
    b.tool("issue_refund", None)
    b.tool("mystery_tool", {"x": 1})
    findings = detect("PG104", b.build())
    kinds = sorted((f.kind, f.details.get("missing", "")) for f in findings)
    assert kinds == [
        ("cannot_decide", "tool_arguments"),
        ("cannot_decide", "tool_schema"),
        ("violation", ""),
    ]
    assert "mystery_tool" in next(
        f.reason for f in findings if f.details.get("missing") == "tool_schema"
    )


def test_pg104_quiet_when_no_schema_is_known() -> None:
    assert detect("PG104", clean_refund_trace()) == []


def test_schema_subset_types_items_and_required() -> None:
    schema = {
        "type": "object",
        "required": ["ids"],
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "flag": {"type": ["boolean", "null"]},
        },
    }
    assert validate({"ids": [1, 2.0], "flag": None}, schema) == []
    assert validate({"ids": [1, True, "x"]}, schema) == [
        "$.ids[1]: expected integer, got bool",
        "$.ids[2]: expected integer, got str",
    ]
    assert validate({}, schema) == ["$: missing required property 'ids'"]
    assert validate("x", {"type": "string", "maxLength": 0}) == ["$: longer than 0 characters"]


def test_pg105_fires_outside_values_and_bounds() -> None:
    rules = {
        "tools": {"issue_refund": {"amount": {"maximum": 500}, "reason": {"values": ["late"]}}}
    }
    b = TraceBuilder()
    b.tool("issue_refund", {"amount": 900, "reason": "late"})
    b.tool("issue_refund", {"amount": 10, "reason": "whim"})
    b.tool("issue_refund", {"amount": 10, "reason": "late"})
    findings = detect("PG105", b.build(), rules)
    assert [(f.details["argument"], f.details["problem"]) for f in findings] == [
        ("amount", "is above the maximum 500"),
        ("reason", "is not one of ['late']"),
    ]
    assert not any("900" in f.reason or "whim" in f.reason for f in findings)  # never values
    uncaptured = TraceBuilder()
    uncaptured.tool("issue_refund", None)
    (undecided,) = detect("PG105", uncaptured.build(), rules)
    assert undecided.kind == "cannot_decide"


def test_pg106_fires_when_before_tool_is_missing_or_later_or_failed() -> None:
    ordering = {"rules": [{"before": "lookup_order", "after": "issue_refund"}]}
    assert detect("PG106", clean_refund_trace(), ordering) == []
    late = TraceBuilder()
    late.tool("issue_refund", {"order_id": "1"})
    late.tool("lookup_order", {"order_id": "1"})
    failed = TraceBuilder()
    failed.tool("lookup_order", {"order_id": "1"}, error="Timeout")
    failed.tool("issue_refund", {"order_id": "1"})
    assert len(detect("PG106", late.build(), ordering)) == 1
    assert len(detect("PG106", failed.build(), ordering)) == 1


def test_pg106_accepts_lookup_in_an_earlier_turn() -> None:
    earlier = TraceBuilder("b" * 32)
    earlier.tool("lookup_order", {"order_id": "1"})
    now = TraceBuilder()
    now.tool("issue_refund", {"order_id": "1"})
    context = history_of(earlier.build())
    shorthand = [{"before": "lookup_order", "after": "issue_refund"}]
    assert detect("PG106", now.build(), shorthand, context) == []


def test_pg107_fires_beyond_repeat_limit_only() -> None:
    def trace(repeats: int):
        b = TraceBuilder()
        for _ in range(repeats):
            b.tool("search_kb", {"q": "router"})
        b.tool("search_kb", {"q": "modem"})
        return b.build()

    assert detect("PG107", trace(3)) == []
    (finding,) = detect("PG107", trace(4))
    assert finding.details["count"] == 4 and finding.span_id == trace(4).spans[4].span_id
    assert detect("PG107", trace(4), {"max_repeats": 4}) == []


def test_pg107_cannot_decide_on_repeated_uncaptured_calls() -> None:
    b = TraceBuilder()
    for _ in range(4):
        b.tool("search_kb", None)
    (finding,) = detect("PG107", b.build())
    assert finding.kind == "cannot_decide" and len(finding.details["span_ids"]) == 4


def test_spans_describing_one_call_are_one_call() -> None:
    """AutoGen's own execute_tool span inside OpenInference's TOOL span for the same tool,
    or two spans with one call id: one call, its arguments from the span that has them,
    its id from the one that carries it; two sibling calls of one tool stay two."""
    b = TraceBuilder()
    b.chat(calls=[("c1", "change_plan"), ("c2", "lookup_order")])
    outer = b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
    inner = b.tool("change_plan", None, call_id="c1", effect="write")
    inner.parent_span_id = outer.span_id
    twins = [b.tool("lookup_order", {"order_id": "1"}, call_id="c2") for _ in range(2)]
    siblings = [b.tool("lookup_order", {"order_id": "1"}) for _ in range(2)]
    trace = b.build()
    calls = TraceView(trace, Conventions()).tool_calls
    assert [c.spans for c in calls] == [(outer, inner), tuple(twins), *[(s,) for s in siblings]]
    assert (calls[0].span, calls[0].call_id, calls[0].arguments) == (
        outer, "c1", {"account_id": "cust-1"})  # fmt: skip
    assert detect("PG100", trace) == [] and detect("PG109", trace) == []
    (loop,) = detect("PG107", trace, {"max_repeats": 2})
    assert loop.details["count"] == 3  # the twins are one call
