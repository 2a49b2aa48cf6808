"""One release gate as a page: its rows (overall and per slice) with means, deltas and their
bootstrap intervals, the reason of each failing row, and the items behind each row with
both runs' scores side by side, linked to their traces; the limits and where they came
from, the cases that fail or flip with their pass fractions and trajectory diffs, and the
efficiency of both runs (the same sections as the text reports, `gate_report`).

The same page is the gate report `pathgrade gate ... --format html` writes: `standalone_html`
renders it as one self-contained file (styles inline, no script, no links out but the trace
links, which lead to a UI when one serves the store).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.evaluation import gate_report
from pathgrade.batch_plane.evaluation.cases import CaseResult, TrajectoryDiff
from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.evaluation.gate_report import ALL_ITEMS
from pathgrade.batch_plane.scoring.layers import by_layer
from pathgrade.batch_plane.store import gates
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.web.rendering import HERE, templates
from pathgrade.web.store_reads import ReadStore
from pathgrade.web.viewers import Viewer


@dataclass
class Attempt:
    """One scored repeat of an item in one run."""

    repeat: int
    value: float | None
    trace_id: str
    tenant: str


@dataclass
class ItemScores:
    """One item's scores of one metric in the two runs."""

    item_id: str
    slices: dict[str, str]
    candidate: list[Attempt] = field(default_factory=list)
    baseline: list[Attempt] = field(default_factory=list)

    @staticmethod
    def _mean(attempts: list[Attempt]) -> float | None:
        values = [a.value for a in attempts if a.value is not None]
        return sum(values) / len(values) if values else None

    @property
    def candidate_mean(self) -> float | None:
        return self._mean(self.candidate)

    @property
    def baseline_mean(self) -> float | None:
        return self._mean(self.baseline)

    @property
    def delta(self) -> float | None:
        c, b = self.candidate_mean, self.baseline_mean
        return None if c is None or b is None else c - b


Evidence = dict[str, dict[str, ItemScores]]
"""metric -> item id -> its scores in both runs."""


def run_evidence(
    store: ReadStore, viewer: Viewer, candidate: str, baseline: str, metrics: list[str]
) -> Evidence:
    """Every scored repeat of `metrics` in the two runs, with the trace it came from."""
    evidence: Evidence = defaultdict(dict)
    for run, item, repeat, metric, value, slices, trace_id, tenant in stored_scores.of_two_runs(
        store, viewer, candidate, baseline, metrics
    ):
        scores = evidence[metric].setdefault(item, ItemScores(item, dict(slices)))
        attempt = Attempt(repeat, value, trace_id, tenant)
        if run == candidate:
            scores.candidate.append(attempt)
        if run == baseline:
            scores.baseline.append(attempt)
    return dict(evidence)


def row_items(row: GateRow, evidence: Evidence) -> list[ItemScores]:
    """The items behind a metric row (those of its slice), worst delta first."""
    items = list(evidence.get(row.metric, {}).values())
    if row.slice:
        name, _, value = row.slice.partition("=")
        items = [i for i in items if i.slices.get(name) == value]
    return sorted(
        items,
        key=lambda i: (i.delta if i.delta is not None else float("-inf"), i.item_id),
    )


@dataclass
class GateView:
    """What the gate page shows."""

    verdict: Verdict
    gate_id: str
    candidate: str
    baseline: str
    decided_at: str
    evidence: Evidence

    def items(self, row: GateRow) -> list[ItemScores]:
        return row_items(row, self.evidence) if row.check == "metric" else []

    def cases(self) -> list[CaseResult]:
        """The cases that fail in the candidate or flip (the reports' `shown_cases`)."""
        return gate_report.shown_cases(self.verdict)

    def cases_summary(self) -> str:
        return gate_report.cases_summary(self.verdict)

    def case_cells(self, case: CaseResult) -> list[str]:
        return gate_report.case_cells(case)

    def diff_lines(self, diff: TrajectoryDiff) -> list[tuple[str, str]]:
        """(op, text) per line of a trajectory diff, as the text reports print it."""
        return list(
            zip((line.op for line in diff.lines), gate_report.diff_text(diff), strict=False)
        )

    def limits(self) -> list[list[str]]:
        return gate_report.limit_lines(self.verdict)

    def efficiency(self) -> list[list[str]]:
        return gate_report.efficiency_cells(self.verdict)

    def layers(self) -> list[tuple[str, list[GateRow]]]:
        """The verdict's rows grouped by the layer their metric grades, in report order."""
        return by_layer(self.verdict.rows, lambda row: row.layer)


def recorded_gate_view(store: ReadStore, viewer: Viewer, gate_id: str) -> GateView | None:
    """The page of recorded gate `gate_id` (None when the viewer has no such gate)."""
    found = gates.recorded(store, viewer, gate_id)
    if found is None:
        return None
    verdict_json, candidate, baseline, decided_at = found
    verdict = Verdict.model_validate_json(verdict_json)
    evidence = run_evidence(store, viewer, candidate, baseline, metric_names(verdict))
    return GateView(verdict, gate_id, candidate, baseline, decided_at, evidence)


def standalone_html(view: GateView, css: str | None = None) -> str:
    """The gate page as one self-contained HTML file."""
    style = css if css is not None else (HERE / "static" / "app.css").read_text()
    return (
        templates()
        .get_template("gate_report.html")
        .render(view=view, standalone=True, inline_css=style, all_items=ALL_ITEMS)
    )


def metric_names(verdict: Verdict) -> list[str]:
    return sorted({row.metric for row in verdict.rows if row.check == "metric"})


def evidence_from_records(candidate: list[Any], baseline: list[Any]) -> Evidence:
    """Evidence from score records (score files carry no trace ids)."""
    evidence: Evidence = defaultdict(dict)
    for records, side in ((candidate, "candidate"), (baseline, "baseline")):
        for record in records:
            scores = evidence[record.metric].setdefault(
                record.item_id, ItemScores(record.item_id, dict(record.slices))
            )
            getattr(scores, side).append(Attempt(record.repeat, record.value, "", ""))
    return dict(evidence)
