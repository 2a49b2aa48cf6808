"""Suite files: the documented example loads; bad keys and values are named with their line."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.batch_plane.evaluation.suite import SuiteError, load_suite, parse_suite

EXAMPLE = """\
suite: support-agent
risk_tier: medium
datasets:
  - name: golden/support-v7
  - name: regression/support-2026q3
  - name: adversarial/injection-v3
runs_per_item: 3
judge:
  model: judge-model-pinned
  rubric_version: faithfulness-r4
  calibration_set: human-labels/support-v2
metrics:
  - id: task_completion
    threshold: 0.85
    max_regression: 0.02
  - id: tool_correctness
    threshold: 0.95
    max_regression: 0.0
  - id: argument_correctness
    threshold: 0.92
    max_regression: 0.01
  - id: faithfulness
    threshold: 0.90
    max_regression: 0.02
  - id: injection_resistance
    threshold: 1.0
budgets:
  p95_latency_s: 12
  cost_per_task_usd: 0.08
slices: [intent, language, tool]
"""


def problems_of(text: str) -> list[str]:
    with pytest.raises(SuiteError) as caught:
        parse_suite(text, source="suite.yaml")
    return caught.value.problems


def test_example_loads_from_file(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(EXAMPLE)
    suite = load_suite(path)
    assert suite.suite == "support-agent"
    assert [m.id for m in suite.metrics][-1] == "injection_resistance"
    assert suite.metrics[4].max_regression is None
    assert suite.metrics[1].max_regression == 0.0
    assert suite.judge is not None and suite.judge.rubric_version == "faithfulness-r4"
    assert suite.budgets is not None and suite.budgets.p95_latency_s == 12
    assert suite.slices == ["intent", "language", "tool"]


def test_metric_kinds_default_from_registry() -> None:
    kinds = {m.id: m.kind for m in parse_suite(EXAMPLE).metrics}
    assert kinds["faithfulness"] == "judge"
    assert kinds["task_completion"] == "judge"
    assert kinds["tool_correctness"] == "deterministic"


def test_wrong_value_names_path_and_line() -> None:
    text = EXAMPLE.replace("threshold: 0.95", "threshold: high")
    assert problems_of(text) == [
        "suite.yaml:17: metrics[1].threshold: Input should be a valid number, "
        "unable to parse string as a number"
    ]


def test_unknown_key_is_an_error_with_its_line() -> None:
    text = EXAMPLE.replace("  calibration_set:", "  calibraton: x\n  calibration_set:")
    assert problems_of(text) == ["suite.yaml:11: judge.calibraton: Extra inputs are not permitted"]


def test_every_problem_is_reported_at_once() -> None:
    text = EXAMPLE.replace("risk_tier: medium", "risk_tier: extreme").replace(
        "runs_per_item: 3", "runs_per_item: 0"
    )
    problems = problems_of(text)
    assert len(problems) == 2
    assert problems[0].startswith("suite.yaml:2: risk_tier: Input should be")
    assert problems[1].startswith("suite.yaml:7: runs_per_item: Input should be greater")


def test_unknown_metric_without_kind_is_named() -> None:
    text = EXAMPLE.replace("id: injection_resistance", "id: politeness")
    assert problems_of(text) == [
        "suite.yaml:25: metrics[4]: unknown metric id 'politeness': "
        "declare `kind: deterministic` or `kind: judge`"
    ]


def test_unknown_metric_with_declared_kind_loads() -> None:
    text = EXAMPLE.replace("id: injection_resistance", "id: politeness\n    kind: judge")
    assert parse_suite(text).metrics[4].is_judge


def test_judge_metric_needs_judge_section() -> None:
    start = EXAMPLE.index("judge:")
    text = EXAMPLE[:start] + EXAMPLE[EXAMPLE.index("metrics:") :]
    (problem,) = problems_of(text)
    assert "judge metrics task_completion, faithfulness need a `judge:` section" in problem


def test_duplicate_metric_ids_are_rejected() -> None:
    text = EXAMPLE.replace("id: argument_correctness", "id: tool_correctness")
    (problem,) = problems_of(text)
    assert "duplicate metric ids: tool_correctness" in problem


def test_negative_max_regression_is_rejected() -> None:
    text = EXAMPLE.replace("max_regression: 0.01", "max_regression: -0.01")
    (problem,) = problems_of(text)
    assert problem.startswith("suite.yaml:21: metrics[2].max_regression: Input should be greater")


def test_invalid_yaml_reports_line() -> None:
    (problem,) = problems_of(EXAMPLE.replace("tool]", "tool"))
    assert problem.startswith("suite.yaml:") and "invalid YAML" in problem


def test_missing_file_is_a_suite_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="cannot read suite file"):
        load_suite(tmp_path / "absent.yaml")


def metric_suite(metric: str) -> str:
    return f"suite: s\nrisk_tier: low\ndatasets: [{{name: d}}]\nmetrics:\n{metric}"


@pytest.mark.parametrize("threshold", ["1.01", "-0.1", "85"])
def test_a_threshold_outside_a_known_metrics_range_is_a_configuration_error(
    threshold: str,
) -> None:
    (problem,) = problems_of(
        metric_suite(f"  - id: tool_correctness\n    threshold: {threshold}\n")
    )
    assert problem.startswith("suite.yaml:6: metrics[0].threshold: ")
    assert "outside the range [0, 1] of metric 'tool_correctness'" in problem
    assert parse_suite(metric_suite("  - id: tool_correctness\n    threshold: 1.0\n"))


def test_a_custom_metric_declares_its_range_or_takes_any_threshold() -> None:
    declared = "  - id: stars\n    kind: deterministic\n    range: [1, 5]\n    threshold: {}\n"
    (problem,) = problems_of(metric_suite(declared.format(7)))
    assert "7 is outside the range [1, 5] of metric 'stars'" in problem
    assert parse_suite(metric_suite(declared.format(4))).metrics[0].range == (1.0, 5.0)
    (problem,) = problems_of(metric_suite(declared.replace("[1, 5]", "[5, 1]").format(3)))
    assert "metrics[0].range: [5.0, 1.0] needs min < max" in problem
    free = "  - id: stars\n    kind: deterministic\n    threshold: 40\n"
    assert parse_suite(metric_suite(free)).metrics[0].threshold == 40


def test_the_gate_command_exits_2_on_a_threshold_above_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathgrade.cli.main import main

    suite = tmp_path / "suite.yaml"
    suite.write_text(metric_suite("  - id: trajectory_match\n    threshold: 1.5\n"))
    scores = tmp_path / "s.jsonl"
    scores.write_text('{"item_id": "a", "repeat": 0, "metric": "trajectory_match", "value": 1}\n')
    code = main(["gate", str(suite), "--candidate-scores", str(scores),
                 "--baseline-scores", str(scores)])  # fmt: skip
    assert code == 2
    assert "metrics[0].threshold: 1.5 is outside the range [0, 1]" in capsys.readouterr().err


TIERED = """\
suite: tiered
risk_tier: {tier}
datasets: [{{name: golden/x}}]
metrics:
  - id: tool_correctness
    threshold: 0.9
  - id: argument_correctness
    threshold: 0.9
    max_regression: 0.1
  - id: trajectory_match
    threshold: 0.9
    max_regression: null
  - id: sound
"""


def limits(tier: str) -> dict[str, tuple[float, str, float | None, str]]:
    suite = parse_suite(TIERED.format(tier=tier))
    return {
        m.id: (m.threshold, m.threshold_from, m.max_regression, m.max_regression_from)
        for m in suite.gated_metrics()
    }


def test_the_risk_tier_sets_limits_the_suite_overrides_and_says_where_each_came_from() -> None:
    assert limits("high") == {
        "tool_correctness": (0.9, "suite", 0.0, "risk tier high"),  # no regression allowed
        "argument_correctness": (0.9, "suite", 0.1, "suite"),  # overridden per metric
        "trajectory_match": (0.9, "suite", None, ""),  # `null` removes the tier's bound
        "sound": (1.0, "risk tier high", None, ""),  # listed: its limit from the tier
    }
    assert limits("medium")["tool_correctness"] == (0.9, "suite", 0.02, "risk tier medium")
    assert limits("medium")["sound"] == (0.95, "risk tier medium", None, "")
    critical = limits("critical")
    assert (
        critical["PG111"] == critical["PG112"] == (1.0, "risk tier critical (required)", None, "")
    )


def test_a_high_tier_gates_sound_even_when_the_suite_does_not_list_it() -> None:
    suite = parse_suite(TIERED.format(tier="high").replace("  - id: sound\n", ""))
    added = suite.gated_metrics()[-1]
    assert (added.id, added.threshold_from) == ("sound", "risk tier high (required)")
    low = parse_suite(TIERED.format(tier="low").replace("  - id: sound\n", ""))
    assert "sound" not in [m.id for m in low.gated_metrics()]
    assert low.gated_metrics()[0].max_regression == 0.05  # small regressions allowed at low


def test_a_metric_with_no_threshold_from_the_suite_or_its_tier_is_an_error() -> None:
    assert problems_of(TIERED.format(tier="low")) == [
        "suite.yaml:13: metrics[3]: no threshold for 'sound': the suite gives none and risk "
        "tier low sets no default for it"
    ]


def test_detector_codes_and_checks_are_known_metrics_and_efficiency_is_not_gated() -> None:
    text = TIERED.format(tier="high") + "  - id: PG110\n    threshold: 1\n"
    text += (
        "  - id: check.answer_regex\n    threshold: 1\n  - id: goal_completed\n    threshold: 1\n"
    )
    suite = parse_suite(text)
    assert {m.id: m.kind for m in suite.metrics}["PG110"] == "deterministic"
    problems = problems_of(TIERED.format(tier="high") + "  - id: tokens\n    threshold: 1\n")
    assert problems == [
        "suite.yaml:14: metrics[4]: 'tokens' is an efficiency metric, reported beside the gate "
        "rather than gated: bound it with `budgets:` or an item's `budget` check"
    ]
    unknown = problems_of(TIERED.format(tier="high") + "  - id: check.nope\n    threshold: 1\n")
    assert "unknown metric id 'check.nope'" in unknown[0]
