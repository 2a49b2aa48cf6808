"""Eval runs in a real embedded store: drive the seeded-defect agent, score its traces, gate.

The agent's spans go through the official OTel SDK and OTLP encoder into the store (the
collector's and store writer's decoding), so scores come from what the traces show.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from pathgrade.batch_plane.agents.adapters import (
    AdapterError,
    CallableAdapter,
    EvalContextSpanProcessor,
    adapter_for,
)
from pathgrade.batch_plane.evaluation.datasets import DatasetItem, conversation_order, parse_items
from pathgrade.batch_plane.evaluation.gate import evaluate_gate
from pathgrade.batch_plane.evaluation.gate_inputs import (
    MissingRun,
    judge_calibrations,
    run_budgets,
    run_scores,
)
from pathgrade.batch_plane.evaluation.runs import (
    RunRecord,
    argument_correctness,
    drive,
    new_run_id,
    reference_match,
    run_eval,
    trajectory_matches,
)
from pathgrade.batch_plane.evaluation.suite import load_suite, parse_suite
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.otlp import decode_spans_message
from pathgrade.detectors import load_policy
from pathgrade.detectors.prices import shipped_price_table

from examples.seeded_defects.agent import BUILDS, CATCHING_METRICS
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "seeded_defects"


class StoreExporter(SpanExporter):
    """SDK spans -> OTLP bytes -> canonical spans -> `spans` rows, as collector and writer do."""

    def __init__(self, target: ClientStore) -> None:
        self.target = target

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        message = encode_spans(spans).SerializeToString()
        decoded = decode_spans_message(message, "default", time.time_ns())
        self.target.insert("spans", span_rows(decoded), list(SPAN_COLUMNS))
        return SpanExportResult.SUCCESS


@pytest.fixture(scope="module")
def traced_store(store: ClientStore) -> Iterator[ClientStore]:
    """The store, with this process's spans (eval context on roots) exported into it."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(EvalContextSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(StoreExporter(store)))
    yield store


def golden() -> list[DatasetItem]:
    return parse_items((EXAMPLE / "golden.jsonl").read_text(), "golden.jsonl")


def evaluate(target: ClientStore, build: str, runs_per_item: int = 2) -> str:
    run = RunRecord(new_run_id(), "support-agent-seeded", build)
    summary = run_eval(
        target, adapter_for(BUILDS[build], build), golden(), run, runs_per_item,
        trace_timeout_s=10, policy=load_policy(EXAMPLE / "policy.yaml"),
    )  # fmt: skip
    assert summary.errors == [] and summary.traces == 9 * runs_per_item
    return run.run_id


@pytest.fixture(scope="module")
def baseline(traced_store: ClientStore) -> str:
    return evaluate(traced_store, "healthy")


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_each_seeded_build_fails_the_gate_on_the_metric_that_catches_it(
    traced_store: ClientStore, baseline: str, build: str
) -> None:
    suite = load_suite(EXAMPLE / "suite.yaml")
    candidate = evaluate(traced_store, build)
    verdict = evaluate_gate(
        suite,
        run_scores(traced_store, candidate),
        run_scores(traced_store, baseline),
        calibrations=judge_calibrations(traced_store, suite),
        budgets=run_budgets(traced_store, candidate, shipped_price_table()),
        resamples=500,
    )
    failed = {row.metric for row in verdict.failed_rows if row.slice is None}
    assert failed == CATCHING_METRICS[build], [r.reason for r in verdict.failed_rows]
    assert verdict.passed == (build == "healthy")


def test_scores_link_items_repeats_and_slices(traced_store: ClientStore, baseline: str) -> None:
    records = run_scores(traced_store, baseline)
    refund_metrics = {r.metric for r in records if r.item_id == "refund-1" and r.repeat == 0}
    detectors = {f"PG{code}" for code in range(100, 123)}
    assert refund_metrics == {
        "tool_correctness", "argument_correctness", "trajectory_match", "reference_match",
        "step_efficiency", "check.answer_regex", "check.ordering", "checks", "sound",
        "goal_completed", "tool_calls", "tokens", "cost_usd", "latency_s", *detectors,
    }  # fmt: skip
    per_attempt = 5 + 23 + 1 + 4  # trajectory (step efficiency too), detectors, sound, efficiency
    checks = (
        3 * 3 + 2 * 4 + 2 * 2 + 1 * 3 + 1
    )  # order, refund (+ goal), kb, plan (+ goal), billing (goal)
    assert len(records) == 18 * per_attempt + 2 * checks
    refund = [r for r in records if r.item_id == "refund-1" and r.metric == "trajectory_match"]
    assert [(r.repeat, r.value, r.slices) for r in refund] == [
        (0, 1.0, {"intent": "refund"}),
        (1, 1.0, {"intent": "refund"}),
    ]


def test_budgets_come_from_root_durations_and_priced_tokens(
    traced_store: ClientStore, baseline: str
) -> None:
    budgets = run_budgets(traced_store, baseline, shipped_price_table())
    assert len(budgets.latencies_s) == 18 and all(0 < s < 5 for s in budgets.latencies_s)
    price = shipped_price_table().price_of("gpt-4o-mini", "openai")
    assert price is not None
    expected = (200 * price.input_usd_per_mtok + 50 * price.output_usd_per_mtok) / 1e6
    # the billing item's two attempts make two model calls each (support, then billing)
    assert sorted(budgets.costs_usd) == pytest.approx([expected] * 16 + [2 * expected] * 2)


def test_an_agent_error_leaves_the_item_unscored_and_the_run_failed(
    traced_store: ClientStore,
) -> None:
    def broken(state: dict, message: str, context: object) -> dict:
        if "A1001" in message:
            raise AdapterError("agent crashed")
        return BUILDS["healthy"].respond(state, message, context)

    run = RunRecord(new_run_id(), "support-agent-seeded", "broken")
    summary = run_eval(traced_store, CallableAdapter(broken), golden(), run, 1, trace_timeout_s=10)
    assert summary.errors == ["order-1 repeat 0: agent crashed"]
    assert run.status == "failed"
    assert "order-1" not in {r.item_id for r in run_scores(traced_store, run.run_id)}


def test_an_unknown_run_is_a_missing_run(traced_store: ClientStore) -> None:
    with pytest.raises(MissingRun, match="run 'run-nope': not in the store"):
        run_scores(traced_store, "run-nope")


def test_a_judge_without_a_calibration_is_uncalibrated(traced_store: ClientStore) -> None:
    suite = parse_suite(
        "suite: s\nrisk_tier: low\ndatasets: [{name: g}]\n"
        "judge: {model: m, rubric_version: r1, calibration_set: c}\n"
        "metrics: [{id: faithfulness, threshold: 0.5}]\n"
    )
    assert judge_calibrations(traced_store, suite) == {("m", "r1"): False}


def test_argument_correctness_compares_only_calls_that_were_made() -> None:
    expected = [{"name": "a", "args": {"x": 1}}, {"name": "b", "args": {"y": 2}}]
    assert argument_correctness([{"name": "a", "args": {"x": 1}}], expected) == 1.0
    assert (
        argument_correctness(
            [{"name": "a", "args": {"x": 2}}, {"name": "b", "args": {"y": 2}}], expected
        )
        == 0.5
    )
    assert argument_correctness([{"name": "c", "args": {}}], expected) is None


def test_argument_correctness_compares_fingerprints_when_values_were_not_stored() -> None:
    """Default settings store no argument: the collector's fingerprint of the called
    arguments is compared with the expected ones fingerprinted with the same key; scrubbed
    values would compare wrong, unknown ones give no score."""
    key = FactSecret(b"f" * 32).for_tenant("default")
    expected = [{"name": "a", "args": {"email": "ann@example.com", "n": 1}}]
    made = {"name": "a", "args": {}, "captured": False,
            "fingerprint": key.fingerprint({"n": 1.0, "email": "ann@example.com"})}  # fmt: skip
    assert argument_correctness([made], expected, key) == 1.0
    other = dict(made, fingerprint=key.fingerprint({"email": "bob@example.com", "n": 1}))
    assert argument_correctness([other], expected, key) == 0.0
    assert argument_correctness([made], expected) is None  # no key: unknown, fails closed
    assert argument_correctness([dict(made, fingerprint="")], expected, key) is None
    scrubbed = {"name": "a", "args": {"email": "[REDACTED:email]", "n": 1}, "captured": True,
                "fingerprint": made["fingerprint"]}  # fmt: skip
    assert argument_correctness([scrubbed], expected, key) == 1.0  # the fingerprint decides


def test_trajectory_match_accepts_alternatives_and_respects_order() -> None:
    item = DatasetItem(
        item_id="i", input="q",
        expected_tool_calls=[{"name": "a"}, {"name": "b"}],
        alternative_trajectories=[[{"name": "c"}]],
    )  # fmt: skip
    assert trajectory_matches(item, [{"name": "a", "args": {"z": 1}}, {"name": "b"}]) == 1.0
    assert trajectory_matches(item, [{"name": "c"}]) == 1.0
    assert trajectory_matches(item, [{"name": "b"}, {"name": "a"}]) == 0.0


def test_reference_match_ignores_case_and_spacing() -> None:
    assert reference_match("Order A1 is  shipped.", "Sure! order a1 is shipped. Bye") == 1.0
    assert reference_match("Hold the reset button", "Unplug the router") == 0.0


def test_conversation_turns_carry_the_agent_state_in_turn_order() -> None:
    seen: list[tuple[str, dict]] = []

    def counting(state: dict, message: str, context: object) -> dict:
        seen.append((message, dict(state)))
        return {"response": "ok", "state": {"turns": state.get("turns", 0) + 1}}

    turns = [
        DatasetItem(item_id=f"t{n}", input={"user": f"u{n}", "conversation_id": conv,
                                            "start_ns": start})
        for n, (conv, start) in enumerate([("c1", 20), ("c2", 5), ("c1", 10)])
    ]  # fmt: skip
    run = RunRecord(new_run_id(), "replay", "counting")
    drive(CallableAdapter(counting), conversation_order(turns), run, 1, conversations=True)
    assert seen == [("u2", {}), ("u0", {"turns": 1}), ("u1", {})]


def test_a_regression_item_is_scored_on_its_lesson_checks_not_on_expected_calls() -> None:
    from pathgrade.batch_plane.agents.adapters import AgentTurn
    from pathgrade.batch_plane.evaluation.datasets import lesson_checks
    from pathgrade.batch_plane.evaluation.runs import Attempt, score_attempt

    from tests.support.traces import TraceBuilder

    item = DatasetItem(
        item_id="r", input="my wifi drops", checks=lesson_checks(["PG101"], ["reset"])
    )
    attempt = Attempt(item, 0, AgentTurn(response="try moving the router"))

    def scored(trace: object) -> dict[str, tuple[float | None, str]]:
        return {s.metric: (s.value, s.explanation) for s in score_attempt(attempt, trace, "run-r")}

    healthy = TraceBuilder("1" * 32)
    healthy.tool("search_kb", {"q": "wifi"})
    kept = scored(healthy.build())
    assert kept["checks"] == (1.0, "")
    assert kept["check.detectors_quiet"] == kept["check.tool_not_called"] == (1.0, "")
    relapsed = TraceBuilder("2" * 32)
    relapsed.tool("search_kb", {"q": "wifi"}, error="timeout")  # PG101 tool-error again
    relapsed.tool("reset", {"device": "router"})
    broken = scored(relapsed.build())
    assert broken["checks"] == (
        0.0,
        "detectors_quiet: PG101 fired again: Tool search_kb failed (timeout). "
        "tool_not_called: Forbidden tool reset was called.",
    )
    assert broken["PG101"][0] == 0.0  # the detector metric says the same
    assert not {"tool_correctness", "trajectory_match"} & broken.keys()
    expecting = item.model_copy(update={"expected_tool_calls": [{"name": "search_kb"}]})
    metrics = {s.metric for s in score_attempt(Attempt(expecting, 0), healthy.build(), "run-r")}
    assert {"checks", "tool_correctness", "argument_correctness", "trajectory_match"} <= metrics


def scored(target: ClientStore, run_id: str, item: str, metric: str) -> list[tuple]:
    return [
        (r.value, r.explanation)
        for r in run_scores(target, run_id)
        if r.item_id == item and r.metric == metric
    ]


def test_the_new_seeded_builds_fail_for_the_reason_that_catches_them(
    traced_store: ClientStore,
) -> None:
    eager = evaluate(traced_store, "eager_ticket", runs_per_item=1)
    (pg110,) = scored(traced_store, eager, "order-1", "PG110")
    assert pg110 == (0.0, "Write open_ticket on a 'read' turn, not an action turn.")
    assert scored(traced_store, eager, "order-1", "sound") == [
        (0.0, "no_orphan_write (PG110): Write open_ticket on a 'read' turn, not an action turn.")
    ]
    assert scored(traced_store, eager, "refund-1", "sound") == [(1.0, "")]
    guard = evaluate(traced_store, "plan_guard", runs_per_item=1)
    assert scored(traced_store, guard, "plan-1", "sound") == [(1.0, "")]  # refusing is sound
    assert scored(traced_store, guard, "plan-1", "goal_completed") == [
        (0.0, "End state: account.plan is 'basic', expected 'premium'.")
    ]
    placeholder = evaluate(traced_store, "placeholder_reference", runs_per_item=1)
    assert scored(traced_store, placeholder, "refund-2", "check.answer_regex") == [
        (0.0, r"The final answer has no match of /\bORD-\d{6}\b/.")
    ]
    assert scored(traced_store, placeholder, "refund-2", "reference_match") == [(1.0, "")]


def test_a_conversations_later_turn_is_scored_with_the_digests_of_its_earlier_turns() -> None:
    """Detector metrics and checks of turn 2 see turn 1, as the realtime plane does: the
    lookup in turn 1 satisfies the ordering of turn 2's refund."""
    from pathgrade.batch_plane.agents.adapters import AgentTurn
    from pathgrade.batch_plane.evaluation.runs import Attempt, score_attempts
    from pathgrade.detectors import load_policy as policy_from

    from tests.support.traces import TraceBuilder

    order = [{"check": "ordering", "before": "lookup_order", "after": "issue_refund"}]
    turns = [
        DatasetItem(item_id=f"t{n}", input={"user": "u", "conversation_id": "c", "start_ns": n},
                    checks=order)
        for n in (1, 2)
    ]  # fmt: skip
    first, second = TraceBuilder("1" * 32), TraceBuilder("2" * 32)
    first.tool("lookup_order", {"order_id": "A1"})
    second.tool("issue_refund", {"order_id": "A1"})
    attempts = [Attempt(item, 0, AgentTurn(response="ok")) for item in turns]
    traces = {attempts[0].key: first.build(), attempts[1].key: second.build()}
    policy = policy_from(EXAMPLE / "policy.yaml")

    def ordering(conversations: bool) -> float | None:
        scores = score_attempts(attempts, traces, "run-c", policy, conversations)
        (value,) = [
            s.value for s in scores if s.dataset_item_id == "t2" and s.metric == "check.ordering"
        ]
        return value

    assert ordering(conversations=True) == 1.0
    assert ordering(conversations=False) == 0.0  # turn 2 alone: a refund with no lookup
