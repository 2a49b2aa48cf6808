"""The release gate: thresholds, paired bootstrap regressions, slices, budgets, exit codes."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest
from pathgrade.batch_plane.evaluation.gate import (
    NO_SCORES,
    UNCALIBRATED,
    BudgetObservations,
    GateRow,
    ScoreFileError,
    ScoreRecord,
    Verdict,
    evaluate_gate,
    exit_code,
    item_means,
    load_scores,
    write_scores,
)
from pathgrade.batch_plane.evaluation.suite import Suite, SuiteError, parse_suite
from pathgrade.stats.bootstrap import paired_bootstrap_interval, paired_bootstrap_intervals

JUDGE = ("judge-v1", "rubric-r1")
CALIBRATED = {JUDGE: True}
BUDGET_OK = BudgetObservations(latencies_s=[1.0, 2.0, 3.0], costs_usd=[0.01, 0.02])


def make_suite(metrics: str, *, slices: str = "[]", budgets: str = "") -> Suite:
    return parse_suite(
        f"""\
suite: demo
risk_tier: low
datasets: [{{name: golden/demo}}]
judge: {{model: {JUDGE[0]}, rubric_version: {JUDGE[1]}, calibration_set: labels/v1}}
metrics:
{metrics}
slices: {slices}
{budgets}"""
    )


ACCURACY = make_suite(
    "  - {id: accuracy, kind: deterministic, threshold: 0.5, max_regression: 0.02}"
)


def scores(
    values: dict[str, list[float]], metric: str = "accuracy", **slices: str
) -> list[ScoreRecord]:
    """Records for each item's repeats."""
    return [
        ScoreRecord(item_id=item, repeat=r, metric=metric, value=v, slices=slices)
        for item, repeats in values.items()
        for r, v in enumerate(repeats)
    ]


def constant(n: int, value: float, prefix: str = "i") -> dict[str, list[float]]:
    return {f"{prefix}{k}": [value, value, value] for k in range(n)}


def gate(suite: Suite, cand: list[ScoreRecord], base: list[ScoreRecord], **kw: object) -> Verdict:
    options: dict[str, object] = {
        "calibrations": CALIBRATED,
        "budgets": BUDGET_OK,
        "resamples": 2000,
    }
    options.update(kw)
    return evaluate_gate(suite, cand, base, **options)  # type: ignore[arg-type]


def only_row(verdict: Verdict, metric: str = "accuracy", slice_: str | None = None) -> GateRow:
    (row,) = [r for r in verdict.rows if r.metric == metric and r.slice == slice_]
    return row


# --- score files -------------------------------------------------------------------------


def test_score_file_round_trip(tmp_path: Path) -> None:
    records = scores({"a": [1.0, 0.0]}, intent="refund")
    write_scores(records, tmp_path / "s.jsonl")
    assert load_scores(tmp_path / "s.jsonl") == records


def test_bad_score_lines_are_named_with_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = {"item_id": "a", "repeat": 0, "metric": "m", "value": 1.0}
    path.write_text(
        json.dumps(good)
        + "\n\n"
        + json.dumps({**good, "repeat": 1, "value": "high"})
        + "\n"
        + json.dumps({"item_id": "b", "metric": "m", "value": 1})
        + "\n{not json\n"
        + json.dumps(good)
        + "\n"
    )
    with pytest.raises(ScoreFileError) as caught:
        load_scores(path)
    problems = caught.value.problems
    assert (
        problems[0]
        == f"{path}:3: value: Input should be a valid number, unable to parse string as a number"
    )
    assert problems[1] == f"{path}:4: repeat: Field required"
    assert problems[2].startswith(f"{path}:5: (record): Invalid JSON")
    assert (
        problems[3]
        == f"{path}:6: duplicate score for item 'a' repeat 0 metric 'm' (first on line 1)"
    )
    assert len(problems) == 4
    with path.open("a") as more:  # a problem after a duplicate is still reported
        more.write(json.dumps({**good, "value": "low"}) + "\n")
    with pytest.raises(ScoreFileError) as again:
        load_scores(path)
    assert len(again.value.problems) == 5 and again.value.problems[4].startswith(f"{path}:7: ")


def test_missing_or_empty_score_file_is_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ScoreFileError, match="cannot read score file") as missing:
        load_scores(tmp_path / "absent.jsonl")
    assert missing.value.problems == [
        f"{tmp_path / 'absent.jsonl'}: cannot read score file: No such file or directory"
    ]
    assert exit_code(missing.value) == 2
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ScoreFileError, match="no score records: the run is missing"):
        load_scores(tmp_path / "empty.jsonl")


def test_bad_suite_exits_two() -> None:
    with pytest.raises(SuiteError) as caught:
        parse_suite("suite: x\n")
    assert exit_code(caught.value) == 2


# --- metric checks -----------------------------------------------------------------------


def test_item_mean_is_over_repeats_first() -> None:
    records = scores({"a": [1.0, 1.0, 1.0, 1.0], "b": [0.0]})
    assert item_means(records) == {"a": 1.0, "b": 0.0}
    row = only_row(gate(ACCURACY, records, records))
    assert row.candidate_mean == pytest.approx(0.5)  # a record mean would say 0.8


def test_equal_runs_pass_with_exit_code_zero() -> None:
    rng = random.Random(3)
    values = {f"i{k}": [float(rng.random() < 0.8) for _ in range(3)] for k in range(200)}
    verdict = gate(ACCURACY, scores(values), scores(values))
    row = only_row(verdict)
    assert row.passed and row.reason == "ok"
    assert row.delta == 0.0 and row.interval == (0.0, 0.0)
    assert exit_code(verdict) == 0


def test_threshold_failure() -> None:
    verdict = gate(ACCURACY, scores(constant(50, 0.4)), scores(constant(50, 0.4)))
    row = only_row(verdict)
    assert not row.passed
    assert row.reason == "mean 0.4000 below threshold 0.5"
    assert exit_code(verdict) == 1


def test_regression_beyond_max_regression_fails() -> None:
    rng = random.Random(5)
    base = {f"i{k}": [0.5 + rng.random() / 2 for _ in range(3)] for k in range(300)}
    cand = {item: [v - 0.05 for v in repeats] for item, repeats in base.items()}
    row = only_row(gate(ACCURACY, scores(cand), scores(base)))
    assert row.delta == pytest.approx(-0.05)
    assert row.interval is not None and row.interval[0] == pytest.approx(-0.05)
    assert not row.passed and row.reason.startswith("regression: 95% interval lower bound -0.0500")


def test_small_noisy_change_within_max_regression_passes() -> None:
    rng = random.Random(7)
    base = {f"i{k}": [0.5 + rng.random() / 2] for k in range(400)}
    cand = {item: [v + rng.uniform(-0.02, 0.02)] for item, (v,) in base.items()}
    row = only_row(gate(ACCURACY, scores(cand), scores(base)))
    assert row.interval is not None and row.interval[0] > -0.02
    assert row.passed


def test_metric_without_max_regression_only_checks_threshold() -> None:
    suite = make_suite("  - {id: accuracy, kind: deterministic, threshold: 0.5}")
    row = only_row(gate(suite, scores(constant(20, 0.6)), scores(constant(20, 1.0))))
    assert row.delta == pytest.approx(-0.4)
    assert row.passed


def test_no_candidate_scores_fails() -> None:
    verdict = gate(ACCURACY, scores(constant(5, 1.0), metric="other"), scores(constant(5, 1.0)))
    row = only_row(verdict)
    assert not row.passed and row.reason == NO_SCORES
    assert exit_code(verdict) == 1


def test_no_baseline_fails_a_regression_check() -> None:
    row = only_row(gate(ACCURACY, scores(constant(5, 1.0)), []))
    assert not row.passed
    assert row.reason == "no paired baseline items: cannot check max_regression"


def test_unpaired_items_are_counted_and_left_out_of_the_delta() -> None:
    cand = scores({"a": [1.0], "b": [1.0], "only-cand": [0.0]})
    base = scores({"a": [0.5], "b": [0.5], "only-base": [0.0]})
    row = only_row(gate(ACCURACY, cand, base))
    assert (row.n_items, row.n_paired, row.n_unpaired) == (3, 2, 2)
    assert row.delta == pytest.approx(0.5)
    assert row.candidate_mean == pytest.approx(2 / 3)


@pytest.mark.parametrize("calibrations", [{}, {JUDGE: False}, {("other", JUDGE[1]): True}])
def test_judge_metric_without_calibration_fails(calibrations: dict) -> None:
    suite = make_suite("  - {id: faithfulness, threshold: 0.5}")
    records = scores(constant(10, 1.0), metric="faithfulness")
    row = only_row(gate(suite, records, records, calibrations=calibrations), "faithfulness")
    assert not row.passed and row.reason == UNCALIBRATED
    calibrated = only_row(gate(suite, records, records), "faithfulness")
    assert calibrated.passed


# --- slices ------------------------------------------------------------------------------


def test_slice_collapse_is_caught_while_the_average_holds() -> None:
    suite = make_suite(
        "  - {id: accuracy, kind: deterministic, threshold: 0.85, max_regression: 0.02}",
        slices="[intent]",
    )
    base, cand = [], []
    for intent, after in (("billing", 1.0), ("refund", 1.0), ("cancel", 0.85)):
        base += scores(constant(100, 0.95, intent), intent=intent)
        cand += scores(constant(100, after, intent), intent=intent)
    verdict = gate(suite, cand, base)
    overall = only_row(verdict)
    assert overall.passed, overall.reason
    assert overall.candidate_mean == pytest.approx(0.95)
    collapsed = only_row(verdict, slice_="intent=cancel")
    assert not collapsed.passed
    assert collapsed.n_items == 100 and collapsed.delta == pytest.approx(-0.10)
    assert "regression" in collapsed.reason
    assert only_row(verdict, slice_="intent=refund").passed
    assert not verdict.passed and exit_code(verdict) == 1


def test_slice_value_missing_from_candidate_fails() -> None:
    suite = make_suite("  - {id: accuracy, kind: deterministic, threshold: 0.5}", slices="[lang]")
    cand = scores(constant(5, 1.0, "en"), lang="en")
    base = cand + scores(constant(5, 1.0, "de"), lang="de")
    row = only_row(gate(suite, cand, base), slice_="lang=de")
    assert not row.passed and row.reason == NO_SCORES


# --- budgets -----------------------------------------------------------------------------

BUDGETED = make_suite(
    "  - {id: accuracy, kind: deterministic, threshold: 0.5}",
    budgets="budgets: {p95_latency_s: 10, cost_per_task_usd: 0.05}",
)


def test_budgets_use_p95_latency_and_mean_cost() -> None:
    records = scores(constant(5, 1.0))
    latencies = [1.0] * 94 + [11.0] * 6  # p95 above 10 although the mean is low
    observed = BudgetObservations(latencies_s=latencies, costs_usd=[0.02, 0.04])
    verdict = gate(BUDGETED, records, records, budgets=observed)
    latency = only_row(verdict, "p95_latency_s")
    assert latency.candidate_mean == pytest.approx(float(np.percentile(latencies, 95)))
    assert not latency.passed and latency.reason.startswith("p95 11 over budget 10")
    cost = only_row(verdict, "cost_per_task_usd")
    assert cost.passed and cost.candidate_mean == pytest.approx(0.03)


@pytest.mark.parametrize("observed", [None, BudgetObservations(latencies_s=[], costs_usd=[0.01])])
def test_missing_budget_observations_fail(observed: BudgetObservations | None) -> None:
    records = scores(constant(5, 1.0))
    row = only_row(gate(BUDGETED, records, records, budgets=observed), "p95_latency_s")
    assert not row.passed and row.reason == "no observations for p95_latency_s: treat as failure"


# --- the bootstrap -----------------------------------------------------------------------


def reference_interval(deltas: list[float], resamples: int, seed: int) -> tuple[float, float]:
    """The slow, obvious percentile bootstrap: resample items, average, take 2.5/97.5%."""
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def small_paired_run() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    base = rng.uniform(0.5, 1.0, size=30)
    return base + rng.normal(-0.01, 0.05, size=30), base


def test_interval_matches_a_plain_reference_loop() -> None:
    cand, base = small_paired_run()
    deltas = cand - base
    ours = paired_bootstrap_interval(deltas, resamples=20_000, seed=1, confidence=0.95)
    reference = reference_interval(list(deltas), resamples=20_000, seed=2)
    assert ours == pytest.approx(reference, abs=0.002)


def test_interval_matches_scipy_paired_percentile_bootstrap() -> None:
    stats = pytest.importorskip("scipy.stats")
    cand, base = small_paired_run()
    result = stats.bootstrap(
        (cand, base),
        lambda c, b, axis: np.mean(c - b, axis=axis),
        paired=True,
        method="percentile",
        n_resamples=20_000,
        rng=np.random.default_rng(3),
    )
    ours = paired_bootstrap_interval(cand - base, resamples=20_000, seed=1, confidence=0.95)
    interval = result.confidence_interval
    assert ours == pytest.approx((interval.low, interval.high), abs=0.002)


def test_batched_intervals_equal_one_at_a_time() -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.normal(size=40), rng.normal(size=7), rng.normal(size=40)]
    options = {"resamples": 3000, "seed": 8, "confidence": 0.9}
    batched = paired_bootstrap_intervals(arrays, **options)  # type: ignore[arg-type]
    single = [paired_bootstrap_interval(a, **options) for a in arrays]  # type: ignore[arg-type]
    assert batched == [pytest.approx(interval, rel=1e-12) for interval in single]
    assert batched[0] != batched[2]


def test_empty_deltas_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one item"):
        paired_bootstrap_interval(np.array([]), resamples=10, seed=1, confidence=0.95)


def test_verdict_is_stable_for_a_seed_and_records_it() -> None:
    rng = random.Random(9)
    base = {f"i{k}": [rng.random() for _ in range(3)] for k in range(100)}
    cand = {item: [min(1.0, v + rng.uniform(-0.1, 0.1)) for v in vs] for item, vs in base.items()}
    first = gate(ACCURACY, scores(cand), scores(base), seed=42)
    again = gate(ACCURACY, scores(cand), scores(base), seed=42)
    other = gate(ACCURACY, scores(cand), scores(base), seed=43)
    assert first == again and first.seed == 42 and first.resamples == 2000
    assert only_row(first).interval != only_row(other).interval


def test_bad_bootstrap_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="resamples"):
        gate(ACCURACY, [], [], resamples=0)
    with pytest.raises(ValueError, match="confidence"):
        gate(ACCURACY, [], [], confidence=1.0)


def test_items_the_candidate_lost_or_scored_too_few_times_fail() -> None:
    suite = make_suite(
        "  - {id: accuracy, kind: deterministic, threshold: 0.5}\n"
        "  - {id: response_consistency_lexical, threshold: 0.5}\n"
        "runs_per_item: 3"
    )
    base = scores(constant(6, 0.9))
    good = constant(6, 0.9)
    assert only_row(gate(suite, scores(good), base)).passed

    lost = {item: values for item, values in good.items() if item not in ("i1", "i4")}
    row = only_row(gate(suite, scores(lost), base))  # the mean of the rest is still 0.9
    assert not row.passed and row.missing_items == ["i1", "i4"]
    assert "2 items scored in the baseline have no candidate score (i1, i4)" in row.reason

    short = {**good, "i2": [0.9, 0.9]}  # a repeat crashed or its judge call failed
    row = only_row(gate(suite, scores(short), base))
    assert not row.passed and row.short_items == ["i2"] and row.expected_repeats == 3
    assert "1 items have fewer than 3 scored repeats (i2)" in row.reason

    # An item metric has one score per item over all its repeats.
    consistency = scores({f"i{k}": [0.8] for k in range(6)}, "response_consistency_lexical")
    verdict = gate(suite, scores(good) + consistency, base + consistency)
    item_row = only_row(verdict, "response_consistency_lexical")
    assert item_row.passed and item_row.expected_repeats == 1


# --- edges the mutation run (bench/mutation.py) found unguarded ---------------------------


def test_without_settings_the_gate_uses_and_records_the_documented_defaults() -> None:
    """docs/gate.md: B = 10,000 resamples and seed 20260101 by default, printed in every
    report."""
    records = scores(constant(5, 1.0))
    verdict = evaluate_gate(ACCURACY, records, records, calibrations=CALIBRATED, budgets=None)
    assert (verdict.resamples, verdict.seed, verdict.confidence) == (10_000, 20_260_101, 0.95)


def test_budget_observations_cannot_change_after_the_fact() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        BUDGET_OK.latencies_s = []  # type: ignore[misc]


def test_budget_rows_count_observations_and_nothing_of_the_metric_rows() -> None:
    records = scores(constant(5, 1.0))
    counts = [
        only_row(gate(BUDGETED, records, records, budgets=observed), "p95_latency_s").model_dump(
            include={"n_items", "n_paired", "n_unpaired", "n_undecided", "expected_repeats"}
        )
        for observed in (BUDGET_OK, None)
    ]  # fmt: skip
    assert counts == [
        {"n_items": 3, "n_paired": 0, "n_unpaired": 0, "n_undecided": 0, "expected_repeats": 1},
        {"n_items": 0, "n_paired": 0, "n_unpaired": 0, "n_undecided": 0, "expected_repeats": 1},
    ]


def test_a_budget_met_exactly_passes() -> None:
    records = scores(constant(5, 1.0))
    observed = BudgetObservations(latencies_s=[10.0] * 20, costs_usd=[0.05] * 4)
    verdict = gate(BUDGETED, records, records, budgets=observed)
    assert only_row(verdict, "p95_latency_s").passed  # p95 10 within budget 10
    assert only_row(verdict, "cost_per_task_usd").passed  # mean 0.05 within 0.05


def test_budget_p95_is_numpys_linear_95th_percentile() -> None:
    records = scores(constant(5, 1.0))
    latencies = [float(s) for s in range(1, 101)]  # p94 94.06, p95 95.05, p96 96.04
    observed = BudgetObservations(latencies_s=latencies, costs_usd=[0.01])
    row = only_row(gate(BUDGETED, records, records, budgets=observed), "p95_latency_s")
    assert row.candidate_mean == pytest.approx(95.05)
    assert row.reason == "p95 95.05 over budget 10"


def test_unpaired_items_are_those_in_one_run_only() -> None:
    cand = scores({"a": [1.0], "b": [1.0], "c": [1.0]})
    base = scores({"b": [1.0], "c": [1.0], "d": [1.0], "e": [1.0]})
    row = only_row(gate(ACCURACY, cand, base))
    assert (row.n_items, row.n_paired, row.n_unpaired) == (3, 2, 3)  # a | d, e


def test_a_long_list_of_missing_items_shows_three_and_how_many_more() -> None:
    base = scores(constant(8, 0.9))
    cand = scores({"i0": [0.9], "i1": [0.9], "i2": [0.9]})
    row = only_row(gate(ACCURACY, cand, base))
    assert "5 items scored in the baseline have no candidate score (i3, i4, i5, +2 more)" in (
        row.reason
    )
    cand = scores({f"i{k}": [0.9] for k in range(5)})
    row = only_row(gate(ACCURACY, cand, base))
    assert "3 items scored in the baseline have no candidate score (i5, i6, i7)" in row.reason


def test_a_regression_check_reads_the_intervals_lower_bound() -> None:
    """Deltas of -0.5 and +0.5 on many items: the mean holds but the interval is wide, and
    its lower bound (not the upper) is what max_regression bounds."""
    base = {f"i{k}": [0.5] for k in range(40)}
    cand = {f"i{k}": [0.0 if k % 2 else 1.0] for k in range(40)}
    row = only_row(gate(ACCURACY, scores(cand), scores(base)))
    assert row.interval is not None and row.interval[0] < -0.02 < row.interval[1]
    assert not row.passed and row.reason.startswith("regression: 95% interval lower bound")


def test_a_drop_exactly_at_max_regression_passes() -> None:
    """Fails only when the lower bound is *below* -max_regression (0.25 is exact in binary)."""
    suite = make_suite(
        "  - {id: accuracy, kind: deterministic, threshold: 0.5, max_regression: 0.25}"
    )
    row = only_row(gate(suite, scores(constant(10, 0.5)), scores(constant(10, 0.75))))
    assert row.interval == (-0.25, -0.25)
    assert row.passed and row.reason == "ok"


def test_the_interval_is_the_percentiles_of_means_drawn_from_the_seed() -> None:
    """A recorded seed reproduces a verdict exactly: the interval is numpy's percentile of
    the means of items drawn with replacement by default_rng(seed), all in one draw here."""
    deltas, _ = small_paired_run()
    indices = np.random.default_rng(4).integers(0, deltas.size, size=(500, deltas.size),
                                                dtype=np.int32)  # fmt: skip
    expected = np.percentile(deltas[indices].mean(axis=1), [5.0, 95.0])
    ours = paired_bootstrap_interval(deltas, resamples=500, seed=4, confidence=0.9)
    assert ours == pytest.approx(tuple(expected), rel=1e-12)


def test_a_run_larger_than_the_memory_bound_still_gets_the_interval_of_its_draws() -> None:
    """Over a million items one resample alone fills the memory bound on resample indices:
    chunks of one resample, and the interval of the seed's draws all the same."""
    deltas = np.resize([-0.5, 0.25, 1.0], 1_000_003)
    rng = np.random.default_rng(1)
    means = [
        deltas[rng.integers(0, deltas.size, size=(1, deltas.size), dtype=np.int32)].mean()
        for _ in range(3)
    ]
    expected = np.percentile(means, [2.5, 97.5])
    ours = paired_bootstrap_interval(deltas, resamples=3, seed=1, confidence=0.95)
    assert ours == pytest.approx(tuple(expected), rel=1e-12)


@pytest.mark.parametrize("confidence", [0.0, -0.5, 1.0, 1.5])
def test_a_confidence_outside_zero_to_one_is_rejected(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        gate(ACCURACY, [], [], confidence=confidence)


def test_one_resample_is_enough_to_run() -> None:
    records = scores(constant(5, 1.0))
    verdict = gate(ACCURACY, records, records, resamples=1, confidence=0.5)
    assert verdict.resamples == 1 and only_row(verdict).interval == (0.0, 0.0)


def test_rows_are_grouped_by_the_layer_their_metric_declares() -> None:
    suite = make_suite(
        "\n".join(
            f"  - {{id: {metric}, kind: deterministic, threshold: 0.5}}"
            for metric in ("accuracy", "PG121", "context_recall", "check.answer_regex", "PG102")
        ),
        budgets="budgets: {p95_latency_s: 10}",
    )
    records = [
        record
        for metric in ("accuracy", "PG121", "context_recall", "check.answer_regex", "PG102")
        for record in scores(constant(5, 1.0), metric)
    ]
    verdict = gate(suite, records, records)
    assert [(row.layer, row.metric) for row in verdict.rows] == [
        ("retrieval", "context_recall"),
        ("hand-off", "PG121"),
        ("answer", "check.answer_regex"),
        ("safety", "PG102"),
        ("other", "accuracy"),
        ("other", "p95_latency_s"),
    ]
