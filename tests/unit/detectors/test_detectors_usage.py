"""PG114's usage figures at their edges (missing token counts, the top span's latency,
every budget set at once, the documented bounds of the budgets), PG113 on a root in error
without an error type and on a cap the collector recorded, PG100's reason naming the top
span, the cost of a call without output tokens or priced by the model that answered, a
turn without a top span."""

from __future__ import annotations

import dataclasses

import pytest
from pathgrade.detectors.completeness import BudgetParams, turn_usage
from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.view import DetectorContext, TraceView
from pydantic import ValidationError

from tests.support.privacy import facts_only
from tests.support.traces import TraceBuilder, detect

BUDGETS = ("max_steps", "max_tool_calls", "max_tokens", "max_cost_usd", "max_latency_ms")


def used(findings: list, budget: str) -> float:
    (finding,) = [f for f in findings if f.details.get("budget") == budget]
    return finding.details["used"]


def test_a_missing_token_count_counts_as_none_used() -> None:
    b = TraceBuilder()
    b.chat(tokens=(None, 20))
    b.chat(tokens=(100, None))
    trace = b.build()
    assert used(detect("PG114", trace, {"max_tokens": 119}), "max_tokens") == 120
    assert detect("PG114", trace, {"max_tokens": 120}) == []  # at the budget: within it


def test_the_cost_of_a_call_without_input_tokens_is_its_output_alone() -> None:
    b = TraceBuilder()
    b.chat(tokens=(None, 1_000_000), model="gpt-4o-2024-08-06")
    cost = used(detect("PG114", b.build(), {"max_cost_usd": 1.0}), "max_cost_usd")
    assert cost == pytest.approx(10.0, rel=1e-12)  # 10.00 per million output tokens


def test_latency_is_the_top_span_duration_in_milliseconds() -> None:
    b = TraceBuilder()
    b.chat()
    trace = b.build()
    assert trace.root is not None
    trace.root.start_ns, trace.root.end_ns = 0, 1_500_000
    assert used(detect("PG114", trace, {"max_latency_ms": 1.0}), "max_latency_ms") == 1.5


def test_every_budget_set_at_once_is_checked() -> None:
    b = TraceBuilder()
    b.chat(tokens=(100, 20), model="gpt-4o-2024-08-06")
    generous = dict.fromkeys(BUDGETS, 1e9)
    assert detect("PG114", b.build(), generous) == []
    findings = detect("PG114", b.build(), {**generous, "max_steps": 0})
    assert [f.details["budget"] for f in findings] == ["max_steps"]


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_budget_is_zero_or_more(budget: str) -> None:
    assert getattr(BudgetParams(**{budget: 0}), budget) == 0
    with pytest.raises(ValidationError, match=budget):
        BudgetParams(**{budget: -1})


def test_pg113_fires_on_a_root_in_error_without_an_error_type() -> None:
    failed = TraceBuilder()
    failed.root.status_code, failed.root.genai.error_type = "Error", ""
    (finding,) = detect("PG113", failed.build())
    assert finding.details["problem"] == "error"


def test_pg113_reads_a_cap_from_the_collector_s_record_of_the_finish_reasons() -> None:
    """On default settings no output is captured; the finish reasons the collector
    recorded with the output's facts still show a capped run."""
    capped = TraceBuilder(answer=None)
    capped.chat(text="partial", finish=("length",))
    trace = facts_only(capped.build())
    for span in trace.spans:
        span.genai.finish_reasons = []  # only the collector's record is left
    (finding,) = detect("PG113", trace)
    assert finding.details["problem"] == "step_cap"


def test_pg100_names_the_top_span_of_a_turn_without_an_agent() -> None:
    b = TraceBuilder()
    b.root.genai.operation, b.root.name = "", "POST /chat"
    (finding,) = detect("PG100", b.build())
    assert "'POST /chat', operation none" in finding.reason


def test_the_cost_of_a_call_without_output_tokens_is_its_input_alone() -> None:
    b = TraceBuilder()
    b.chat(tokens=(1_000_000, None), model="gpt-4o-2024-08-06")
    cost = used(detect("PG114", b.build(), {"max_cost_usd": 1.0}), "max_cost_usd")
    assert cost == pytest.approx(2.5, rel=1e-12)  # 2.50 per million input tokens


def test_a_call_is_priced_by_the_model_that_answered() -> None:
    """The request named an alias (not in the price table); the response names the model
    that answered, and that is what is priced."""
    b = TraceBuilder()
    chat = b.chat(tokens=(None, 1_000_000), model="gpt-4o-2024-08-06")
    chat.genai.request_model = "our-default-model"
    cost = used(detect("PG114", b.build(), {"max_cost_usd": 1.0}), "max_cost_usd")
    assert cost == pytest.approx(10.0, rel=1e-12)


def test_a_turn_without_a_top_span_took_no_time_and_its_usage_cannot_be_changed() -> None:
    """A trace whose spans' parents form a cycle (a broken exporter) has no top span: its
    latency is 0; the usage PG114 and the offline metrics share is frozen."""
    b = TraceBuilder()
    b.chat()
    trace = b.build()
    first, *rest = trace.spans
    first.parent_span_id = rest[-1].span_id if rest else first.span_id
    view = TraceView(trace, Conventions())
    assert view.top is None
    usage = turn_usage(view, DetectorContext())
    assert usage.latency_ms == 0.0 and usage.steps == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.steps = 2  # type: ignore[misc]
