"""The gate per case: undecided attempts counted apart, pass fractions, flips, efficiency,
trajectory diffs, and how every report format shows them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from pathgrade.batch_plane.evaluation.cases import (
    DiffLine,
    diff_targets,
    trajectory_diff,
    with_diffs,
)
from pathgrade.batch_plane.evaluation.gate import ScoreRecord, Verdict, load_scores, write_scores
from pathgrade.batch_plane.evaluation.gate_report import to_json, to_junit, to_markdown, to_terminal
from pathgrade.batch_plane.evaluation.suite import parse_suite

from tests.unit.batch_plane.evaluation.test_gate import gate, only_row

SUITE = parse_suite(
    """\
suite: cases
risk_tier: high
datasets: [{name: golden/x}]
runs_per_item: 2
metrics:
  - {id: tool_correctness, threshold: 0.9}
  - {id: checks, threshold: 1.0}
"""
)


def record(item: str, repeat: int, metric: str, value: float | None, **extra: str) -> ScoreRecord:
    return ScoreRecord(item_id=item, repeat=repeat, metric=metric, value=value, **extra)


def run(
    failing: dict[tuple[str, int], str] | None = None, undecided: frozenset | set = frozenset()
) -> list[ScoreRecord]:
    """Items a, b, c with two repeats: tool_correctness, checks, sound 1 unless failing
    (metric) or undecided; tokens 100 per attempt."""
    records = []
    for item in "abc":
        for repeat in (0, 1):
            for metric in ("tool_correctness", "checks", "sound", "check.answer_regex"):
                key = (item, repeat)
                value: float | None = 0.0 if (failing or {}).get(key) == metric else 1.0
                label, why = "", ""
                if (key, metric) in undecided:
                    value, label, why = None, "cannot_decide", "PG113: no output captured"
                elif value == 0.0:
                    why = f"{metric} broke"
                records.append(record(item, repeat, metric, value, label=label, explanation=why,
                                      trace_id=f"t-{item}{repeat}"))  # fmt: skip
            records.append(record(item, repeat, "tokens", 100.0 + 50 * (item == "c")))
    return records


def test_an_undecided_attempt_is_counted_apart_and_fails_the_row() -> None:
    candidate = run(undecided={(("a", 1), "checks")})
    row = only_row(gate(SUITE, candidate, run()), "checks")
    assert not row.passed and row.n_undecided == 1
    assert row.candidate_mean == 1.0  # the decided attempts' mean; the undecided one apart
    assert row.reason == (
        "1 attempts could not be decided (cannot_decide 1: PG113: no output captured), "
        "counted apart"
    )
    assert row.short_items == []  # the repeat is there, undecided, not missing
    everything = run(undecided={((i, r), "checks") for i in "abc" for r in (0, 1)})
    row = only_row(gate(SUITE, everything, run()), "checks")
    assert row.reason.startswith("no decided scores: 6 attempts could not be decided")


def test_each_case_has_pass_fractions_per_metric_and_overall_and_flips_are_listed() -> None:
    candidate = run({("a", 0): "checks", ("a", 1): "checks", ("b", 1): "tool_correctness"})
    baseline = run({("c", 0): "check.answer_regex"})
    verdict = gate(SUITE, candidate, baseline)
    cases = {case.item_id: case for case in verdict.cases}
    assert [case.item_id for case in verdict.cases] == ["a", "b", "c"]  # regressed, then fixed
    assert (cases["a"].flip, cases["b"].flip, cases["c"].flip) == (
        "regressed",
        "regressed",
        "fixed",
    )
    a = cases["a"].candidate
    assert a is not None and not a.passed and a.overall.fraction == 0.0
    assert a.metrics["checks"].passed == 0 and a.metrics["tool_correctness"].passed == 2
    assert a.failures == ["repeat 0: checks: checks broke", "repeat 1: checks: checks broke"]
    assert (a.failing_repeat, a.failing_trace) == (0, "t-a0")
    b = cases["b"].candidate
    assert b is not None and (b.overall.passed, b.overall.attempts) == (1, 2)
    assert "sound" in b.metrics  # gated: the high tier requires it
    assert "tokens" not in b.metrics  # efficiency is reported, not passed or failed
    assert cases["c"].baseline is not None and not cases["c"].baseline.passed  # a check failed
    assert cases["c"].candidate is not None and cases["c"].candidate.efficiency == {"tokens": 150.0}
    (tokens,) = verdict.efficiency
    assert (tokens.metric, tokens.candidate_mean, tokens.delta) == ("tokens", 350 / 3, 0.0)


def test_a_diff_shows_the_expected_and_the_made_path_side_by_side() -> None:
    expected = [
        {"name": "request_confirmation", "args": {"action": "issue_refund"}},
        {"name": "issue_refund", "args": {"order_id": "A2001"}},
    ]
    made = [("issue_refund", {"order_id": "A2001"}), ("open_ticket", None)]
    assert trajectory_diff(expected, made) == [
        DiffLine(op="expected", call='request_confirmation(action="issue_refund")'),
        DiffLine(op="same", call='issue_refund(order_id="A2001")'),
        DiffLine(op="actual", call="open_ticket(?)"),
    ]
    changed = trajectory_diff(expected[1:], [("issue_refund", {"order_id": "A2002"})])
    assert [line.op for line in changed] == ["expected", "actual"]
    unknown = trajectory_diff(expected[1:], [("issue_refund", None)])  # not captured: same name
    assert unknown == [DiffLine(op="same", call="issue_refund(?)")]


def test_failing_cases_get_the_diff_of_their_first_failing_attempt() -> None:
    verdict = gate(SUITE, run({("a", 1): "checks"}), run({("c", 0): "checks"}))
    assert diff_targets(verdict.cases) == ["t-a1", "t-c0"]  # regressed a; fixed c (baseline)
    expected = {"a": [{"name": "lookup_order"}], "c": [{"name": "lookup_order"}]}
    actual = {"t-a1": [("lookup_order", {}), ("open_ticket", {})], "t-c0": []}
    cases = {c.item_id: c for c in with_diffs(verdict.cases, expected, actual)}
    a, c = cases["a"].diff, cases["c"].diff
    assert a is not None and (a.side, a.repeat, a.trace_id) == ("candidate", 1, "t-a1")
    assert [line.op for line in a.lines] == ["same", "actual"]
    assert c is not None and c.side == "baseline" and [line.op for line in c.lines] == ["expected"]
    assert cases["b"].diff is None
    assert diff_targets(verdict.cases, limit=1) == ["t-a1"]


def diffed_verdict() -> Verdict:
    verdict = gate(SUITE, run({("a", 0): "checks"}), run())
    cases = with_diffs(
        verdict.cases,
        {"a": [{"name": "lookup_order", "args": {"order_id": "A1"}}]},
        {"t-a0": [("lookup_order", {"order_id": "A1"}), ("open_ticket", None)]},
    )
    return verdict.model_copy(update={"cases": cases})


def test_reports_show_limits_cases_diffs_and_efficiency() -> None:
    verdict = diffed_verdict()
    table = to_terminal(verdict)
    assert "limits (risk tier high):" in table
    assert "sound" in table and "risk tier high (required)" in table
    assert "2 of 3 cases pass in every candidate attempt; regressed: a; fixed: none" in table
    assert "\na (regressed): candidate repeat 0, trace t-a0\n    repeat 0: checks: " in table
    assert '    lookup_order(order_id="A1")\n  + open_ticket(?)' in table
    markdown = to_markdown(verdict)
    assert (
        "### Limits (risk tier high)" in markdown
        and "### Efficiency (mean per attempt)" in markdown
    )
    assert "| a | regressed | 1/2 | 2/2 | checks 1/2 |" in markdown
    assert '```diff\n  lookup_order(order_id="A1")\n+ open_ticket(?)\n```' in markdown
    assert "- repeat 0: checks: checks broke" in markdown
    suites = ET.fromstring(to_junit(verdict)).findall("testsuite")
    assert [s.get("name") for s in suites] == ["cases", "cases cases"]
    cases = suites[1]
    assert (cases.get("tests"), cases.get("failures")) == ("3", "1")
    failure = cases.find("testcase[@name='a']/failure")
    assert failure is not None and failure.get("message", "").startswith("regressed: checks 1/2")
    assert "+ open_ticket(?)" in (failure.text or "")
    data = json.loads(to_json(verdict))
    assert data["cases"][0]["diff"]["lines"][1] == {"op": "actual", "call": "open_ticket(?)"}
    assert data["metrics"][-1]["threshold_from"] == "risk tier high (required)"
    data.pop("passed")
    assert Verdict.model_validate(data) == verdict  # `gates show` reprints the same report


def test_undecided_scores_travel_through_score_files(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.jsonl"
    records = run(undecided={(("b", 0), "checks")})
    write_scores(records, path)
    assert load_scores(path) == records
    (undecided,) = [r for r in load_scores(path) if r.value is None]
    assert (undecided.item_id, undecided.label) == ("b", "cannot_decide")


def test_the_html_report_shares_the_gate_page_and_shows_cases_diffs_limits_efficiency() -> None:
    from pathgrade.web.gate_page import GateView, standalone_html

    page = standalone_html(GateView(diffed_verdict(), "gate-1", "cand", "base", "", {}))
    assert "2 of 3 cases pass in every candidate attempt; regressed: a; fixed: none" in page
    assert '<tr class="case regressed" data-item="a">' in page
    assert '<span class="diff-same">  lookup_order(order_id=&#34;A1&#34;)</span>' in page
    assert '<span class="diff-actual">+ open_ticket(?)</span>' in page
    assert "<li>repeat 0: checks: checks broke</li>" in page
    assert "risk tier high (required)" in page and 'id="gate-efficiency"' in page
