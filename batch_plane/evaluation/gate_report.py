"""Gate verdicts as text: a terminal table, a GitHub job summary, JSON and JUnit XML.

Every format carries the bootstrap seed and resample count, so a reader can reproduce it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict

COLUMNS = (
    "status",
    "metric",
    "slice",
    "n",
    "unpaired",
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
        row.metric,
        row.slice or ALL_ITEMS,
        str(row.n_items),
        str(row.n_unpaired),
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


def to_terminal(verdict: Verdict) -> str:
    """An aligned plain-text table under the headline, rows in gate order."""
    table = [list(COLUMNS), *(row_cells(row) for row in verdict.rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        for line in table
    ]
    return "\n".join([headline(verdict), *(line.rstrip() for line in lines)]) + "\n"


def to_markdown(verdict: Verdict) -> str:
    """A GitHub job summary: a PASS/FAIL headline, then the table with failed rows first."""
    mark = "✅" if verdict.passed else "❌"
    ordered = sorted(verdict.rows, key=lambda row: row.passed)  # stable: failures first
    lines = [
        f"## {mark} {headline(verdict)}",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(_markdown_cell(c) for c in row_cells(row)) + " |" for row in ordered),
    ]
    return "\n".join(lines) + "\n"


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
            classname=f"{verdict.suite}.{row.check}",
            name=f"{row.metric} [{row.slice or ALL_ITEMS}]",
        )
        if not row.passed:
            failure = ET.SubElement(case, "failure", message=row.reason, type=row.check)
            failure.text = "\n".join(
                f"{column}: {cell}" for column, cell in zip(COLUMNS, row_cells(row), strict=True)
            )
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
