"""PG100 trace completeness, PG101 tool error, PG113 termination, PG114 budgets, prices."""

from __future__ import annotations

import json

import pytest
from pathgrade.detectors import cost_usd, load_price_table
from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.view import DetectorContext, TraceView

from tests.support.traces import TraceBuilder, clean_refund_trace, detect


def problems(findings: list) -> list[str]:
    return [f.details.get("problem", f.details.get("budget", "")) for f in findings]


def test_pg100_quiet_on_complete_trace() -> None:
    assert detect("PG100", clean_refund_trace()) == []


def test_pg100_fires_on_unmatched_tool_call_and_missing_tokens() -> None:
    b = TraceBuilder()
    b.chat(calls=[("c1", "lookup_order"), ("c2", "issue_refund")], tokens=(None, 3))
    b.tool("lookup_order", {"order_id": "1"}, call_id="c1")
    findings = detect("PG100", b.build())
    assert sorted(problems(findings)) == ["missing_token_usage", "missing_tool_span"]
    missing = next(f for f in findings if f.details["problem"] == "missing_tool_span")
    assert missing.details["tool_call_id"] == "c2" and missing.kind == "violation"


def test_pg100_asks_the_turn_for_an_agent_span_never_its_top_to_be_one() -> None:
    trace = clean_refund_trace()
    root = trace.root
    assert root is not None
    root.genai.operation, root.name = "invoke_workflow", "invoke_workflow refunds"
    assert detect("PG100", trace) == []  # a workflow runs the turn
    root.genai.operation, root.name = "", "POST /chat"
    assert problems(detect("PG100", trace)) == ["no_agent_span"]
    assert detect("PG100", trace, {"require_root_agent": False}) == []  # its former name
    b = TraceBuilder()
    b.root.genai.operation, b.root.name = "", "POST /chat"
    b.agent("support-agent")  # the agent runs inside the server span
    assert detect("PG100", b.build()) == []


def test_pg100_a_model_class_s_private_helper_is_no_model_call() -> None:
    """LlamaIndex under OpenInference records `OpenAI._prepare_chat_with_tools`, which
    builds the request, as an LLM span without tokens: not an inference span. A span of a
    public method without tokens is one that lost its usage."""
    b = TraceBuilder()
    helper = b.chat(tokens=(None, None), attributes={"openinference.span.kind": "LLM"})
    helper.name = "OpenAI._prepare_chat_with_tools"
    assert detect("PG100", b.build()) == []
    assert detect("PG114", b.build(), {"max_steps": 0}) == []  # it is no step either
    helper.name = "OpenAI.astream_chat"
    assert problems(detect("PG100", b.build())) == ["missing_token_usage"]


def test_pg100_a_handoff_span_answers_the_tool_call_that_requested_it() -> None:
    """OpenInference's OpenAI Agents SDK instrumentation records the handoff the model
    requested as tool `transfer_to_billing_agent` as a TOOL span "handoff to Billing
    agent" without the call's id."""
    b = TraceBuilder()
    b.chat(calls=[("c1", "transfer_to_billing_agent"), ("c2", "transfer_to_refunds")])
    handoff = b.tool("handoff to Billing agent", None)
    handoff.genai.tool_name = ""
    handoff.name = "handoff to Billing agent"
    (finding,) = detect("PG100", b.build())
    assert (finding.details["problem"], finding.details["tool"]) == (
        "missing_tool_span", "transfer_to_refunds")  # fmt: skip
    assert TraceView(b.build(), Conventions()).tool_calls == []  # a handoff calls no tool
    assert detect("PG112", b.build()) == []  # so it has no arguments to miss


def test_pg101_fires_on_failed_tool_unless_ignored() -> None:
    b = TraceBuilder()
    b.tool("lookup_order", {"order_id": "1"}, error="NotFound")
    b.tool("get_policy", {"topic": "x"})
    trace = b.build()
    (finding,) = detect("PG101", trace)
    assert finding.span_id == trace.spans[1].span_id and finding.details["error_type"] == "NotFound"
    assert detect("PG101", trace, {"ignore_error_types": ["NotFound"]}) == []
    assert detect("PG101", clean_refund_trace()) == []


def test_pg113_fires_without_final_answer_on_cap_and_on_error() -> None:
    capped = TraceBuilder(answer=None)
    capped.chat(text="partial", finish=("length",))
    no_answer = TraceBuilder(answer=None)
    no_answer.chat(calls=[("c1", "search")])
    failed = TraceBuilder()
    failed.root.status_code, failed.root.genai.error_type = "Error", "MaxTurnsExceeded"
    assert problems(detect("PG113", capped.build())) == ["step_cap"]
    assert problems(detect("PG113", no_answer.build())) == ["no_final_answer"]
    assert problems(detect("PG113", failed.build())) == ["step_cap"]
    assert detect("PG113", clean_refund_trace()) == []


def test_pg113_cannot_decide_without_captured_output() -> None:
    b = TraceBuilder(answer=None)
    b.chat()
    (finding,) = detect("PG113", b.build())
    assert finding.kind == "cannot_decide" and finding.details["missing"] == "output_messages"


def test_pg114_quiet_without_budgets_and_fires_per_exceeded_budget() -> None:
    trace = clean_refund_trace()
    assert detect("PG114", trace) == []
    budgets = {"max_tool_calls": 3, "max_steps": 5, "max_tokens": 10_000}
    findings = detect("PG114", trace, budgets)
    assert problems(findings) == ["max_tool_calls"]
    assert findings[0].details["used"] == 4


def test_pg114_cost_uses_price_table_and_cannot_decide_for_unknown_model() -> None:
    b = TraceBuilder()
    b.chat(tokens=(1_000_000, 1_000_000), model="gpt-4o-2024-08-06")
    priced = b.build()
    (finding,) = detect("PG114", priced, {"max_cost_usd": 5.0})
    assert finding.details["used"] == pytest.approx(12.5)  # 2.50 + 10.00 list price
    assert detect("PG114", priced, {"max_cost_usd": 20.0}) == []
    unknown = TraceBuilder()
    unknown.chat(model="in-house-llm")
    (undecided,) = detect("PG114", unknown.build(), {"max_cost_usd": 1.0})
    assert undecided.kind == "cannot_decide" and "in-house-llm" in undecided.reason


def test_cost_usd_matches_longest_prefix_and_unknown_is_none() -> None:
    table = load_price_table()
    assert cost_usd("gpt-4o-mini-2024-07-18", "openai", 1_000_000, 0, table) == pytest.approx(0.15)
    assert cost_usd("gpt-4o", "", 0, 2_000_000, table) == pytest.approx(20.0)
    assert cost_usd("nope", "openai", 10, 10, table) is None


def test_user_price_file_overrides_and_adds_models(tmp_path) -> None:
    user = {
        "version": "acme-2026-01",
        "effective_date": "2026-01-01",
        "models": [
            {
                "provider": "openai",
                "model": "gpt-4o",
                "input_usd_per_mtok": 1.0,
                "output_usd_per_mtok": 1.0,
            },
            {
                "provider": "acme",
                "model": "house",
                "input_usd_per_mtok": 2.0,
                "output_usd_per_mtok": 0.0,
            },
        ],
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(user))
    table = load_price_table(path)
    assert table.version == "acme-2026-01"
    assert cost_usd("gpt-4o", "openai", 1_000_000, 0, table) == pytest.approx(1.0)
    assert cost_usd("house", "acme", 1_000_000, 0, table) == pytest.approx(2.0)
    assert cost_usd("claude-sonnet-4", "anthropic", 1_000_000, 0, table) == pytest.approx(3.0)
    context = DetectorContext(prices=table)
    b = TraceBuilder()
    b.chat(tokens=(1_000_000, 0), model="house")
    (finding,) = detect("PG114", b.build(), {"max_cost_usd": 1.0}, context)
    assert finding.details["used"] == pytest.approx(2.0)


def test_invalid_price_file_names_the_field(tmp_path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {
                "version": "x",
                "effective_date": "2026-01-01",
                "models": [
                    {
                        "provider": "p",
                        "model": "m",
                        "input_usd_per_mtok": -1,
                        "output_usd_per_mtok": 0,
                    }
                ],
            }
        )
    )
    with pytest.raises(ValueError, match="input_usd_per_mtok"):
        load_price_table(path)
