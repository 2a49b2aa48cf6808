"""The gate per case: each item's pass fractions, the cases that flip between the runs, the
efficiency of both runs, and the expected-versus-actual trajectory of a failing case.

An attempt (one repeat of one item) passes a metric when its value reaches the metric's
threshold; the metrics of a case are the gated ones and every per-case check the item
declares (`check.<name>`). It passes overall when it passes every one of them; a value
the metric could not decide is never a pass and is counted apart. A case passes in a run
when every attempt passed overall; it *regressed* when it passed in the baseline and not
in the candidate, and was *fixed* the other way round.
"""

from __future__ import annotations

import difflib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pathgrade.batch_plane.evaluation.records import ScoreRecord
from pathgrade.batch_plane.evaluation.suite import GatedMetric
from pathgrade.batch_plane.scoring.path_metrics import EFFICIENCY_METRICS
from pydantic import BaseModel, Field, computed_field

CHECK_PREFIX = "check."
MAX_DIFFS = 25
"""Trajectory diffs a verdict carries at most (regressed cases first)."""
Flip = Literal["regressed", "fixed", ""]
Side = Literal["candidate", "baseline"]
Call = tuple[str, dict[str, Any] | None]
"""A tool call of a trace: name and arguments (None: not captured)."""


class PassFraction(BaseModel):
    """Attempts that passed, out of the attempts scored; `undecided` of them had no value."""

    passed: int = 0
    attempts: int = 0
    undecided: int = 0

    @property
    def fraction(self) -> float | None:
        return self.passed / self.attempts if self.attempts else None

    def add(self, passed: bool | None) -> None:
        self.attempts += 1
        self.passed += passed is True
        self.undecided += passed is None


class CaseRun(BaseModel):
    """One case in one run: pass fractions overall and per metric, what failed (repeat,
    metric, reason), its mean efficiency, and its first failing attempt."""

    overall: PassFraction
    metrics: dict[str, PassFraction]
    failures: list[str] = Field(default_factory=list)
    efficiency: dict[str, float] = Field(default_factory=dict)
    failing_repeat: int | None = None
    failing_trace: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """Every attempt passed every metric of the case."""
        return self.overall.attempts > 0 and self.overall.passed == self.overall.attempts


class DiffLine(BaseModel):
    """One line of a trajectory diff: a call in both paths, only expected, or only made."""

    op: Literal["same", "expected", "actual"]
    call: str


class TrajectoryDiff(BaseModel):
    """The expected path against the path of one failing attempt, line by line."""

    side: Side
    repeat: int
    trace_id: str
    lines: list[DiffLine]


class CaseResult(BaseModel):
    """One dataset item across both runs."""

    item_id: str
    slices: dict[str, str] = Field(default_factory=dict)
    candidate: CaseRun | None = None
    baseline: CaseRun | None = None
    flip: Flip = ""
    diff: TrajectoryDiff | None = None

    @property
    def failing_side(self) -> Side | None:
        """The run whose failing attempt a diff shows: the candidate when it fails, else
        the baseline of a fixed case; None when neither applies."""
        if self.candidate is not None and not self.candidate.passed:
            return "candidate"
        return "baseline" if self.flip == "fixed" else None


class EfficiencyRow(BaseModel):
    """One efficiency metric of both runs: means per attempt, and attempts without a value
    (an unpriced model's cost)."""

    metric: str
    candidate_mean: float | None
    baseline_mean: float | None
    delta: float | None
    candidate_attempts: int
    candidate_undecided: int


def _attempt_passes(value: float | None, threshold: float | None) -> bool | None:
    if value is None:
        return None
    return value >= (threshold if threshold is not None else 1.0)


def case_runs(
    metrics: Sequence[GatedMetric], records: Iterable[ScoreRecord]
) -> dict[str, tuple[dict[str, str], CaseRun]]:
    """Per item of one run: its slices and its CaseRun."""
    thresholds = {metric.id: metric.threshold for metric in metrics}
    by_attempt: dict[str, dict[int, list[ScoreRecord]]] = defaultdict(lambda: defaultdict(list))
    slices: dict[str, dict[str, str]] = {}
    for record in records:
        slices.setdefault(record.item_id, record.slices)
        by_attempt[record.item_id][record.repeat].append(record)
    runs = {}
    for item, attempts in sorted(by_attempt.items()):
        run = CaseRun(overall=PassFraction(), metrics={})
        totals: dict[str, list[float]] = defaultdict(list)
        for repeat, found in sorted(attempts.items()):
            verdicts = []
            for record in found:
                if record.metric in EFFICIENCY_METRICS and record.value is not None:
                    totals[record.metric].append(record.value)
                if record.metric not in thresholds and not record.metric.startswith(CHECK_PREFIX):
                    continue
                passed = _attempt_passes(record.value, thresholds.get(record.metric))
                run.metrics.setdefault(record.metric, PassFraction()).add(passed)
                verdicts.append(passed)
                if passed is not True:
                    why = record.explanation or record.label or f"value {record.value:g}"
                    run.failures.append(f"repeat {repeat}: {record.metric}: {why}")
                    if run.failing_repeat is None:
                        run.failing_repeat, run.failing_trace = repeat, record.trace_id
            if verdicts:
                run.overall.add(False if False in verdicts else None if None in verdicts else True)
        run.efficiency = {metric: sum(v) / len(v) for metric, v in sorted(totals.items())}
        runs[item] = (slices[item], run)
    return runs


def case_results(
    metrics: Sequence[GatedMetric],
    candidate: Sequence[ScoreRecord],
    baseline: Sequence[ScoreRecord],
) -> list[CaseResult]:
    """Every case of either run: regressed first, then failing, fixed, passing; by item."""
    cand, base = case_runs(metrics, candidate), case_runs(metrics, baseline)
    results = []
    for item in sorted(cand.keys() | base.keys()):
        c = cand[item][1] if item in cand else None
        b = base[item][1] if item in base else None
        flip: Flip = ""
        if c is not None and b is not None and c.passed != b.passed:
            flip = "fixed" if c.passed else "regressed"
        item_slices = (cand.get(item) or base[item])[0]
        results.append(CaseResult(item_id=item, slices=item_slices, candidate=c, baseline=b,
                                  flip=flip))  # fmt: skip
    return sorted(results, key=lambda r: (_rank(r), r.item_id))


def _rank(case: CaseResult) -> int:
    """Regressed, still failing (or missing from the candidate), fixed, passing."""
    if case.flip:
        return 0 if case.flip == "regressed" else 2
    return 3 if case.candidate is not None and case.candidate.passed else 1


def efficiency_rows(
    candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord]
) -> list[EfficiencyRow]:
    """Tool calls, tokens, cost and latency of both runs, per attempt (metrics neither run
    scored are left out)."""
    rows = []
    for metric in EFFICIENCY_METRICS:
        cand = [r for r in candidate if r.metric == metric]
        base = [r.value for r in baseline if r.metric == metric and r.value is not None]
        values = [r.value for r in cand if r.value is not None]
        if not cand and not base:
            continue
        c_mean = sum(values) / len(values) if values else None
        b_mean = sum(base) / len(base) if base else None
        delta = c_mean - b_mean if c_mean is not None and b_mean is not None else None
        rows.append(
            EfficiencyRow(
                metric=metric, candidate_mean=c_mean, baseline_mean=b_mean, delta=delta,
                candidate_attempts=len(cand), candidate_undecided=len(cand) - len(values),
            )
        )  # fmt: skip
    return rows


def diff_targets(cases: Sequence[CaseResult], limit: int = MAX_DIFFS) -> list[str]:
    """The trace ids of the failing attempts whose diffs a verdict shows, in case order."""
    traces = []
    for case in cases:
        side = case.failing_side
        run = getattr(case, side) if side else None
        if run is not None and run.failing_trace:
            traces.append(run.failing_trace)
    return traces[:limit]


def with_diffs(
    cases: Sequence[CaseResult],
    expected: Mapping[str, Sequence[Mapping[str, Any]]],
    actual: Mapping[str, Sequence[Call]],
    limit: int = MAX_DIFFS,
) -> list[CaseResult]:
    """The cases with the trajectory diff of their failing attempt (for at most `limit`
    cases, in case order): `expected` maps item ids to expected calls, `actual` trace ids
    to the calls the trace shows."""
    shown = set(diff_targets(cases, limit))
    out = []
    for case in cases:
        side = case.failing_side
        run = getattr(case, side) if side else None
        if side and run is not None and run.failing_trace in shown and run.failing_trace in actual:
            diff = TrajectoryDiff(
                side=side,
                repeat=run.failing_repeat or 0,
                trace_id=run.failing_trace,
                lines=trajectory_diff(expected.get(case.item_id, ()), actual[run.failing_trace]),
            )
            case = case.model_copy(update={"diff": diff})
        out.append(case)
    return out


def call_label(name: str, args: Mapping[str, Any] | None) -> str:
    """`name(key=value, ...)` with JSON values; `name(?)` when arguments are unknown."""
    if args is None:
        return f"{name}(?)"
    shown = ", ".join(f"{key}={json.dumps(value, sort_keys=True)}" for key, value in args.items())
    return f"{name}({shown})"


def trajectory_diff(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Call]
) -> list[DiffLine]:
    """Expected calls against the calls made, aligned by tool name. A call in both paths
    whose arguments are unknown, or hold every expected argument, is the same line; other
    aligned pairs show the expected and the made call."""
    names = difflib.SequenceMatcher(
        a=[call["name"] for call in expected], b=[name for name, _ in actual], autojunk=False
    )
    lines: list[DiffLine] = []
    for op, a0, a1, b0, b1 in names.get_opcodes():
        if op == "equal":
            for want, (name, args) in zip(expected[a0:a1], actual[b0:b1], strict=True):
                lines += _aligned(want, name, args)
            continue
        lines += [DiffLine(op="expected", call=_expected_label(c)) for c in expected[a0:a1]]
        lines += [DiffLine(op="actual", call=call_label(n, a)) for n, a in actual[b0:b1]]
    return lines


def _aligned(want: Mapping[str, Any], name: str, args: dict[str, Any] | None) -> list[DiffLine]:
    wanted = want.get("args") or {}
    if args is None or all(key in args and args[key] == value for key, value in wanted.items()):
        return [DiffLine(op="same", call=call_label(name, args))]
    return [
        DiffLine(op="expected", call=_expected_label(want)),
        DiffLine(op="actual", call=call_label(name, args)),
    ]


def _expected_label(call: Mapping[str, Any]) -> str:
    return call_label(call["name"], call.get("args") or {})
