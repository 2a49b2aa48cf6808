"""A suite's `judge.rubric_version` pins the rubric its judge metric is scored with."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.evaluation.suite import parse_suite

from pathgrade.cli.suite_scoring import pinned_rubric
from pathgrade.cli.support import CliError

SUITE = """
suite: s
risk_tier: low
datasets: [{{name: golden/x}}]
runs_per_item: 1
judge: {{model: m, rubric_version: {version}, calibration_set: c}}
metrics:
  - {{id: faithfulness, threshold: 0.9}}
  - {{id: task_completion, threshold: 0.9}}
"""


def suite(version: str) -> object:
    return parse_suite(SUITE.format(version=version))


def test_a_shipped_ref_pins_its_metric_only() -> None:
    assert pinned_rubric(suite("faithfulness@1"), ("faithfulness", "task_completion")) == {
        "faithfulness": "faithfulness@1"
    }


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("faithfulness-r4", "judge.rubric_version: unknown rubric 'faithfulness-r4'"),
        ("faithfulness@9", "judge.rubric_version: rubric 'faithfulness' has no version '9'"),
        ("plan_quality@1", "is not the rubric of any metric scored here"),
    ],
)
def test_an_unshipped_or_unrelated_version_is_a_clear_error(version: str, message: str) -> None:
    with pytest.raises(CliError, match=message) as error:
        pinned_rubric(suite(version), ("faithfulness", "task_completion"))
    assert error.value.exit_code == 2
