"""Gate report formats: terminal table, GitHub summary, JSON and JUnit XML."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.evaluation.gate_report import to_json, to_junit, to_markdown, to_terminal


def make_verdict() -> Verdict:
    return Verdict(
        suite="support-agent",
        seed=1234,
        resamples=10_000,
        confidence=0.95,
        rows=[
            GateRow(
                check="metric",
                metric="task_completion",
                layer="answer",
                n_items=300,
                n_paired=298,
                n_unpaired=2,
                candidate_mean=0.91,
                baseline_mean=0.9,
                delta=0.01,
                interval=(-0.004, 0.021),
                threshold=0.85,
                max_regression=0.02,
                passed=True,
                reason="ok",
            ),
            GateRow(
                check="metric",
                metric="task_completion",
                layer="answer",
                slice="intent=cancel|refund",
                n_items=100,
                n_paired=100,
                candidate_mean=0.85,
                baseline_mean=0.95,
                delta=-0.1,
                interval=(-0.1, -0.1),
                threshold=0.85,
                max_regression=0.02,
                passed=False,
                reason="regression: 95% interval lower bound -0.1000 below -0.02",
            ),
            GateRow(
                check="budget",
                metric="p95_latency_s",
                threshold=12.0,
                passed=False,
                reason="no observations for p95_latency_s: treat as failure",
            ),
        ],
    )


def test_terminal_table_is_aligned_and_names_the_seed() -> None:
    lines = to_terminal(make_verdict()).splitlines()
    assert lines[0].startswith("gate support-agent: FAIL (2 of 3 rows failed; seed 1234")
    header, *rows = lines[1:]
    column = header.index("candidate")
    assert [row[column : column + 6] for row in rows] == ["0.9100", "0.8500", "-     "]
    assert rows[0].startswith("PASS") and "[-0.0040, +0.0210]" in rows[0]
    assert "(all)" in rows[0] and rows[0].split()[1] == "answer"


def test_markdown_has_headline_and_a_table_per_layer_failed_rows_first() -> None:
    text = to_markdown(make_verdict())
    lines = text.splitlines()
    assert lines[0].startswith("## ❌ gate support-agent: FAIL") and "seed 1234" in lines[0]
    headings = [line for line in lines if line.startswith("### ")]
    assert headings[:2] == [
        "### answer: FAIL (1 of 2 rows failed)",
        "### other: FAIL (1 of 1 rows failed)",
    ]
    table = [line for line in lines if line.startswith("| ")]
    assert table[0].startswith("| status | layer | metric | slice |")
    assert [line.split(" | ")[:2] for line in table if not line.startswith("| status")] == [
        ["| FAIL", "answer"], ["| PASS", "answer"], ["| FAIL", "other"]
    ]  # fmt: skip
    assert "intent=cancel\\|refund" in text  # a pipe in a cell does not break the table


def test_markdown_pass_headline() -> None:
    verdict = make_verdict()
    verdict.rows = verdict.rows[:1]
    assert to_markdown(verdict).startswith("## ✅ gate support-agent: PASS")


def test_json_round_trips_with_passed_flag() -> None:
    verdict = make_verdict()
    data = json.loads(to_json(verdict))
    assert data["passed"] is False and data["seed"] == 1234
    data.pop("passed")
    assert Verdict.model_validate(data) == verdict


def test_junit_parses_with_one_case_per_row_and_failure_reasons() -> None:
    root = ET.fromstring(to_junit(make_verdict()))
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "support-agent"
    assert (suite.get("tests"), suite.get("failures")) == ("3", "2")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["seed"] == "1234" and properties["resamples"] == "10000"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "task_completion [(all)]",
        "task_completion [intent=cancel|refund]",
        "p95_latency_s [(all)]",
    ]
    classes = [c.get("classname") for c in cases]
    assert classes == ["support-agent.answer", "support-agent.answer", "support-agent.other"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "regression: 95% interval lower bound -0.1000 below -0.02"
    assert "interval: [-0.1000, -0.1000]" in (failure.text or "")
    assert cases[2].find("failure").get("type") == "budget"  # type: ignore[union-attr]
