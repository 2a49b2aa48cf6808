"""Gate verdicts as text: a terminal table, a GitHub job summary, JSON and JUnit XML.

Rows are grouped by the layer of the agent their metric grades (`schemas.layers`): the
table's `layer` column, a Markdown table per layer, a JUnit class per layer. Every format
carries the bootstrap seed and resample count, so a reader can reproduce it,
the limits of each metric with where they came from (the suite or its risk tier), the
cases that fail or flip with their pass fractions and the diff of a failing attempt's
trajectory against the expected one, and the efficiency of both runs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from pathgrade.batch_plane.evaluation.cases import CaseResult, CaseRun, TrajectoryDiff
from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.scoring.layers import by_layer

CASES_SHOWN = 50
"""Failing or flipped cases the table and Markdown list at most (JSON and JUnit: all)."""
DIFF_MARKS = {"same": " ", "expected": "-", "actual": "+"}
COLUMNS = (
    "status",
    "layer",
    "metric",
    "slice",
    "n",
    "unpaired",
    "undecided",
    "candidate",
    "baseline",
    "delta",
    "interval",
    "threshold",
    "max_regression",
    "reason",
)
ALL_ITEMS = "(all)"


def headline(verdict: Verdict) -> str:
    """One line: suite, PASS/FAIL, failures and how the intervals were drawn."""
    status = "PASS" if verdict.passed else "FAIL"
    failed = len(verdict.failed_rows)
    return (
        f"gate {verdict.suite}: {status} ({failed} of {len(verdict.rows)} rows failed; "
        f"seed {verdict.seed}, {verdict.resamples} resamples, "
        f"{verdict.confidence:.0%} paired percentile bootstrap)"
    )


def row_cells(row: GateRow) -> list[str]:
    """A row's cells, in `COLUMNS` order, as display text."""
    interval = f"[{row.interval[0]:+.4f}, {row.interval[1]:+.4f}]" if row.interval else "-"
    return [
        "PASS" if row.passed else "FAIL",
        row.layer,
        row.metric,
        row.slice or ALL_ITEMS,
        str(row.n_items),
        str(row.n_unpaired),
        str(row.n_undecided),
        _number(row.candidate_mean),
        _number(row.baseline_mean),
        _number(row.delta, signed=True),
        interval,
        _number(row.threshold),
        _number(row.max_regression),
        row.reason,
    ]


def _number(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def limit_lines(verdict: Verdict) -> list[list[str]]:
    """Per gated metric: id, threshold and its source, max_regression and its source."""
    return [
        [
            metric.id,
            f"{metric.threshold:g}",
            metric.threshold_from,
            _limit(metric.max_regression),
            metric.max_regression_from or "-",
        ]
        for metric in verdict.metrics
    ]


LIMIT_COLUMNS = ("metric", "threshold", "from", "max_regression", "from")
CASE_COLUMNS = ("case", "flip", "candidate", "baseline", "failing (candidate pass fraction)")
EFFICIENCY_COLUMNS = ("metric", "candidate", "baseline", "delta", "no value")


def _limit(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def shown_cases(verdict: Verdict) -> list[CaseResult]:
    """Cases that fail in the candidate or flip, in verdict order."""
    return [c for c in verdict.cases if c.flip or not (c.candidate and c.candidate.passed)]


def cases_summary(verdict: Verdict) -> str:
    """`N of M cases pass every attempt; regressed: a, b; fixed: c`."""
    passing = sum(1 for c in verdict.cases if c.candidate is not None and c.candidate.passed)
    regressed = [c.item_id for c in verdict.cases if c.flip == "regressed"]
    fixed = [c.item_id for c in verdict.cases if c.flip == "fixed"]
    return (
        f"{passing} of {len(verdict.cases)} cases pass in every candidate attempt; "
        f"regressed: {', '.join(regressed) or 'none'}; fixed: {', '.join(fixed) or 'none'}"
    )


def _fraction(run: CaseRun | None) -> str:
    if run is None:
        return "-"
    overall = run.overall
    undecided = f" ({overall.undecided} undecided)" if overall.undecided else ""
    return f"{overall.passed}/{overall.attempts}{undecided}"


def case_cells(case: CaseResult) -> list[str]:
    """A case's cells, in `CASE_COLUMNS` order."""
    run = case.candidate
    failing = (
        ", ".join(
            f"{metric} {part.passed}/{part.attempts}"
            for metric, part in run.metrics.items()
            if part.passed < part.attempts
        )
        if run is not None
        else "not in the candidate"
    )
    return [case.item_id, case.flip or "-", _fraction(run), _fraction(case.baseline), failing]


def efficiency_cells(verdict: Verdict) -> list[list[str]]:
    """Per efficiency metric: means per attempt of both runs, delta, attempts without value."""
    return [
        [
            row.metric,
            _number(row.candidate_mean),
            _number(row.baseline_mean),
            _number(row.delta, signed=True),
            str(row.candidate_undecided),
        ]
        for row in verdict.efficiency
    ]


def diff_title(case: CaseResult, diff: TrajectoryDiff) -> str:
    """`refund-1 (regressed): candidate repeat 0, trace <id>`."""
    flip = f" ({case.flip})" if case.flip else ""
    return f"{case.item_id}{flip}: {diff.side} repeat {diff.repeat}, trace {diff.trace_id}"


def diff_text(diff: TrajectoryDiff) -> list[str]:
    """Unified-diff lines: `  ` in both paths, `- ` expected only, `+ ` made only."""
    return [f"{DIFF_MARKS[line.op]} {line.call}" for line in diff.lines] or ["  (no calls)"]


def _failure_lines(case: CaseResult) -> list[str]:
    side = case.failing_side
    run = getattr(case, side) if side else None
    return run.failures if run is not None else []


def _aligned(table: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]


def to_terminal(verdict: Verdict) -> str:
    """An aligned plain-text table under the headline, rows in gate order; then the limits,
    the failing and flipped cases with their diffs, and efficiency."""
    lines = [headline(verdict), *_aligned([COLUMNS, *(row_cells(row) for row in verdict.rows)])]
    if verdict.metrics:
        lines += ["", f"limits (risk tier {verdict.risk_tier}):"]
        lines += ["  " + line for line in _aligned([LIMIT_COLUMNS, *limit_lines(verdict)])]
    if verdict.cases:
        shown = shown_cases(verdict)
        lines += ["", cases_summary(verdict)]
        if shown:
            cells = [case_cells(case) for case in shown[:CASES_SHOWN]]
            lines += ["  " + line for line in _aligned([CASE_COLUMNS, *cells])]
            lines += _more(len(shown))
        for case in shown:
            if case.diff is not None:
                lines += ["", diff_title(case, case.diff)]
                lines += ["    " + failure for failure in _failure_lines(case)]
                lines += ["  " + line for line in diff_text(case.diff)]
    if verdict.efficiency:
        lines += ["", "efficiency (mean per attempt):"]
        lines += [
            "  " + line for line in _aligned([EFFICIENCY_COLUMNS, *efficiency_cells(verdict)])
        ]
    return "\n".join(lines) + "\n"


def _more(shown: int) -> list[str]:
    return [f"  (+{shown - CASES_SHOWN} more: see the JSON report)"] if shown > CASES_SHOWN else []


def _markdown_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return [
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(_markdown_cell(c) for c in row) + " |" for row in rows),
    ]


def to_markdown(verdict: Verdict) -> str:
    """A GitHub job summary: a PASS/FAIL headline, a table per layer with its failed rows
    first, the limits, the failing and flipped cases with a diff per failing item (as a PR
    comment shows one), and efficiency."""
    mark = "✅" if verdict.passed else "❌"
    lines = [f"## {mark} {headline(verdict)}"]
    for layer, rows in by_layer(verdict.rows, lambda row: row.layer):
        failed = sum(1 for row in rows if not row.passed)
        ordered = sorted(rows, key=lambda row: row.passed)  # stable: failures first
        lines += [
            "",
            f"### {layer}: {'FAIL' if failed else 'PASS'} ({failed} of {len(rows)} rows failed)",
            "",
        ]
        lines += _markdown_table(COLUMNS, [row_cells(row) for row in ordered])
    if verdict.metrics:
        lines += ["", f"### Limits (risk tier {verdict.risk_tier})", ""]
        lines += _markdown_table(LIMIT_COLUMNS, limit_lines(verdict))
    if verdict.cases:
        shown = shown_cases(verdict)
        lines += ["", "### Cases", "", cases_summary(verdict)]
        if shown:
            lines += [
                "",
                *_markdown_table(CASE_COLUMNS, [case_cells(c) for c in shown[:CASES_SHOWN]]),
            ]
            lines += _more(len(shown))
        for case in shown:
            if case.diff is not None:
                lines += ["", f"#### {diff_title(case, case.diff)}", ""]
                lines += [f"- {_markdown_inline(f)}" for f in _failure_lines(case)]
                lines += ["", "```diff", *diff_text(case.diff), "```"]
    if verdict.efficiency:
        lines += ["", "### Efficiency (mean per attempt)", ""]
        lines += _markdown_table(EFFICIENCY_COLUMNS, efficiency_cells(verdict))
    return "\n".join(lines) + "\n"


def _markdown_inline(text: str) -> str:
    return text.replace("`", "'").replace("\n", " ")


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_json(verdict: Verdict) -> str:
    """The verdict as JSON (every row and field, plus `passed`)."""
    return verdict.model_dump_json(indent=2)


def to_junit(verdict: Verdict) -> str:
    """JUnit XML: one testsuite for the gate, one testcase per row, failures with the reason."""
    suites = ET.Element("testsuites", name="pathgrade gate")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=verdict.suite,
        tests=str(len(verdict.rows)),
        failures=str(len(verdict.failed_rows)),
        errors="0",
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("seed", verdict.seed),
        ("resamples", verdict.resamples),
        ("confidence", verdict.confidence),
    ):
        ET.SubElement(properties, "property", name=name, value=str(value))
    for row in verdict.rows:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{verdict.suite}.{row.layer}",
            name=f"{row.metric} [{row.slice or ALL_ITEMS}]",
        )
        if not row.passed:
            failure = ET.SubElement(case, "failure", message=row.reason, type=row.check)
            failure.text = "\n".join(
                f"{column}: {cell}" for column, cell in zip(COLUMNS, row_cells(row), strict=True)
            )
    if verdict.cases:
        _junit_cases(suites, verdict)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _junit_cases(suites: ET.Element, verdict: Verdict) -> None:
    """A second testsuite, `<suite> cases`: one testcase per case, a failure on each case
    the candidate does not pass in every attempt (its failures and its diff as text)."""
    failing = shown_cases(verdict)
    failed = [c for c in failing if not (c.candidate and c.candidate.passed)]
    suite = ET.SubElement(
        suites, "testsuite", name=f"{verdict.suite} cases", tests=str(len(verdict.cases)),
        failures=str(len(failed)), errors="0",
    )  # fmt: skip
    for case in verdict.cases:
        element = ET.SubElement(suite, "testcase", classname=f"{verdict.suite}.case",
                                name=case.item_id)  # fmt: skip
        if case.candidate is not None and case.candidate.passed:
            continue
        cells = case_cells(case)
        message = (
            f"{case.flip or 'failing'}: {cells[4]} (candidate {cells[2]}, baseline {cells[3]})"
        )
        failure = ET.SubElement(element, "failure", message=message, type="case")
        text = _failure_lines(case)
        if case.diff is not None:
            text += ["", diff_title(case, case.diff), *diff_text(case.diff)]
        failure.text = "\n".join(text)
