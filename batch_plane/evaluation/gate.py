"""The release gate: candidate scores against thresholds and a baseline, overall and per slice.

Pure functions over score records. Per metric (and per observed value of every suite
slice) the gate checks:

1. the candidate mean (mean over items of each item's mean over its repeats) reaches the
   metric's threshold;
2. with `max_regression` set, a paired percentile bootstrap over dataset items of
   (candidate item mean - baseline item mean) gives an interval whose lower bound must not
   fall below `-max_regression`. Items resample with all their repeats together; items
   scored in only one run are left out of the paired part and counted in `n_unpaired`.

It fails closed: no candidate scores, an uncalibrated judge, no paired baseline items for a
regression check, an attempt the metric could not decide (a score without a value, counted
apart), or missing budget observations are failures.

Thresholds and regression bounds come from the suite or its risk tier
(`Suite.gated_metrics`); each row says which. The verdict also carries each case's pass
fractions, the cases that flip between the runs and the efficiency of both runs
(`batch_plane.evaluation.cases`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pathgrade.batch_plane.evaluation.cases import (
    CaseResult,
    EfficiencyRow,
    case_results,
    efficiency_rows,
)
from pathgrade.batch_plane.evaluation.records import ScoreRecord, item_means
from pathgrade.batch_plane.evaluation.suite import ConfigurationError, GatedMetric, Suite
from pathgrade.batch_plane.scoring.layers import layer_of, layer_rank
from pathgrade.batch_plane.scoring.trace_scorers import ITEM_METRICS
from pathgrade.schemas.layers import OTHER
from pathgrade.stats.bootstrap import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    paired_bootstrap_intervals,
)
from pydantic import BaseModel, Field, ValidationError, computed_field
from pydantic_core import ErrorDetails

NO_SCORES = "no scores: treat as failure"
UNCALIBRATED = "uncalibrated judge"

JudgeKey = tuple[str, str]
"""(judge model, rubric version): the unit a calibration is recorded for."""


class ScoreFileError(ConfigurationError):
    """A score file that is missing, empty or holds bad records; `problems` lists them."""


@dataclass(frozen=True)
class BudgetObservations:
    """What the candidate run spent: latency (s) and cost (USD) of each task."""

    latencies_s: Sequence[float]
    costs_usd: Sequence[float]


class GateRow(BaseModel):
    """One checked line of the verdict: a metric (or budget) overall or in one slice value."""

    check: Literal["metric", "budget"]
    metric: str
    layer: str = OTHER  # the layer the metric grades (`schemas.layers`)
    slice: str | None = None  # "intent=refund"; None for all items
    n_items: int = 0  # candidate items (budget rows: observations)
    n_paired: int = 0
    n_unpaired: int = 0  # items scored in only one of the two runs
    missing_items: list[str] = Field(default_factory=list)  # in the baseline, not the candidate
    short_items: list[str] = Field(default_factory=list)  # candidate items with too few repeats
    expected_repeats: int = 1  # the suite's runs_per_item
    n_undecided: int = 0  # candidate attempts the metric could not decide (no value)
    candidate_mean: float | None = None  # budget rows: the observed p95 latency or mean cost
    baseline_mean: float | None = None
    delta: float | None = None  # mean over paired items of candidate - baseline
    interval: tuple[float, float] | None = None
    threshold: float | None = None  # budget rows: the upper limit
    max_regression: float | None = None
    threshold_from: str = ""  # suite, risk tier <tier>, ...
    max_regression_from: str = ""
    passed: bool
    reason: str


class Verdict(BaseModel):
    """The gate's decision with every row it checked and how the intervals were drawn."""

    suite: str
    seed: int
    resamples: int
    confidence: float
    risk_tier: str = ""
    metrics: list[GatedMetric] = Field(default_factory=list)  # the limits and their sources
    rows: list[GateRow]
    cases: list[CaseResult] = Field(default_factory=list)
    efficiency: list[EfficiencyRow] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        """True when every row passed."""
        return all(row.passed for row in self.rows)

    @property
    def failed_rows(self) -> list[GateRow]:
        """The rows that failed, in table order."""
        return [row for row in self.rows if not row.passed]


def exit_code(outcome: Verdict | ConfigurationError) -> int:
    """Process exit code: 0 pass, 1 fail, 2 bad configuration or a missing run."""
    if isinstance(outcome, ConfigurationError):
        return 2
    return 0 if outcome.passed else 1


def load_scores(path: str | Path) -> list[ScoreRecord]:
    """Read a JSONL score file (one record a line); raise `ScoreFileError` naming each bad
    line and field, a repeated (item, repeat, metric), a missing file or an empty one."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ScoreFileError([f"{path}: cannot read score file: {exc.strerror or exc}"]) from exc
    records: list[ScoreRecord] = []
    problems: list[str] = []
    first_line: dict[tuple[str, int, str], int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = ScoreRecord.model_validate_json(line)
        except ValidationError as exc:
            problems.extend(_describe_record_error(path, number, error) for error in exc.errors())
            continue
        key = (record.item_id, record.repeat, record.metric)
        if key in first_line:
            problems.append(
                f"{path}:{number}: duplicate score for item {key[0]!r} repeat {key[1]} "
                f"metric {key[2]!r} (first on line {first_line[key]})"
            )
            continue
        first_line[key] = number
        records.append(record)
    if not records and not problems:
        problems.append(f"{path}: no score records: the run is missing")
    if problems:
        raise ScoreFileError(problems)
    return records


def _describe_record_error(path: Path, number: int, error: ErrorDetails) -> str:
    """One pydantic error of one JSONL line as `file:line: field: reason`."""
    field = ".".join(str(part) for part in error["loc"]) or "(record)"
    return f"{path}:{number}: {field}: {error['msg']}"


def write_scores(records: Iterable[ScoreRecord], path: str | Path) -> None:
    """Write records as a JSONL score file (the format `load_scores` reads)."""
    with Path(path).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(record.model_dump_json() + "\n")


@dataclass
class _Measurement:
    """A metric row before its verdict, with the per-item deltas of its paired items."""

    metric: GatedMetric
    row: GateRow
    deltas: np.ndarray
    undecided: str = ""  # why some candidate attempts have no value ("" when none)


def evaluate_gate(
    suite: Suite,
    candidate: Sequence[ScoreRecord],
    baseline: Sequence[ScoreRecord],
    *,
    calibrations: Mapping[JudgeKey, bool],
    budgets: BudgetObservations | None,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Verdict:
    """Check the candidate run against the suite and the baseline run.

    `calibrations` maps (judge model, rubric version) to whether its calibration passed; a
    judge metric whose pair is absent or False fails. Rows come per metric overall, then per
    metric and slice value, then the budgets.
    """
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    judge = suite.judge
    calibrated = judge is not None and calibrations.get((judge.model, judge.rubric_version), False)
    measurements = _measure_all(suite, candidate, baseline)
    bootstrapped = [m for m in measurements if m.deltas.size]
    intervals = paired_bootstrap_intervals(
        [m.deltas for m in bootstrapped], resamples=resamples, seed=seed, confidence=confidence
    )
    for measurement, interval in zip(bootstrapped, intervals, strict=True):
        measurement.row.interval = interval
    rows = [_decide(m, calibrated, confidence) for m in measurements]
    rows.extend(_budget_rows(suite, budgets))
    rows.sort(key=lambda row: layer_rank(row.layer))  # stable: grouped by layer
    metrics = suite.gated_metrics()
    return Verdict(
        suite=suite.suite,
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        risk_tier=suite.risk_tier,
        metrics=metrics,
        rows=rows,
        cases=case_results(metrics, candidate, baseline),
        efficiency=efficiency_rows(candidate, baseline),
    )


def _measure_all(
    suite: Suite, candidate: Sequence[ScoreRecord], baseline: Sequence[ScoreRecord]
) -> list[_Measurement]:
    """Measurements per metric overall, then per metric and observed slice value."""
    candidate_by_metric = _group_by_metric(candidate)
    baseline_by_metric = _group_by_metric(baseline)
    metrics = suite.gated_metrics()
    measurements = [
        _measure(
            metric,
            None,
            candidate_by_metric[metric.id],
            baseline_by_metric[metric.id],
            _expected_repeats(metric, suite),
        )
        for metric in metrics
    ]
    for slice_name in suite.slices:
        for metric in metrics:
            cand_parts = _split_by_slice(candidate_by_metric[metric.id], slice_name)
            base_parts = _split_by_slice(baseline_by_metric[metric.id], slice_name)
            measurements.extend(
                _measure(
                    metric,
                    f"{slice_name}={value}",
                    cand_parts[value],
                    base_parts[value],
                    _expected_repeats(metric, suite),
                )
                for value in sorted(cand_parts.keys() | base_parts.keys())
            )
    return measurements


def _expected_repeats(metric: GatedMetric, suite: Suite) -> int:
    """Scored repeats each item needs: `runs_per_item`, except for item metrics (one score
    over all of an item's repeats)."""
    return 1 if metric.id in ITEM_METRICS else suite.runs_per_item


def _group_by_metric(records: Iterable[ScoreRecord]) -> defaultdict[str, list[ScoreRecord]]:
    grouped: defaultdict[str, list[ScoreRecord]] = defaultdict(list)
    for record in records:
        grouped[record.metric].append(record)
    return grouped


def _split_by_slice(
    records: Iterable[ScoreRecord], name: str
) -> defaultdict[str, list[ScoreRecord]]:
    """Records by their value of slice `name`; records without that slice are left out."""
    parts: defaultdict[str, list[ScoreRecord]] = defaultdict(list)
    for record in records:
        value = record.slices.get(name)
        if value is not None:
            parts[value].append(record)
    return parts


def _measure(
    metric: GatedMetric,
    slice_label: str | None,
    candidate: Sequence[ScoreRecord],
    baseline: Sequence[ScoreRecord],
    runs_per_item: int = 1,
) -> _Measurement:
    """Item counts, means, paired deltas and coverage (items the baseline scored that the
    candidate did not, candidate items with fewer than `runs_per_item` repeats, candidate
    attempts left undecided) of one metric over one set of records."""
    row = GateRow(
        check="metric",
        metric=metric.id,
        layer=layer_of(metric.id),
        slice=slice_label,
        threshold=metric.threshold,
        max_regression=metric.max_regression,
        threshold_from=metric.threshold_from,
        max_regression_from=metric.max_regression_from,
        passed=False,
        reason=NO_SCORES,
    )
    undecided = [record for record in candidate if record.value is None]
    row.n_undecided = len(undecided)
    why_undecided = _undecided(undecided) if undecided else ""
    if undecided and not any(record.value is not None for record in candidate):
        row.reason = f"no decided scores: {why_undecided}"
    cand_items = item_means(candidate)
    base_items = item_means(baseline)
    paired = sorted(cand_items.keys() & base_items.keys())
    deltas = np.array([cand_items[item] - base_items[item] for item in paired], dtype=np.float64)
    row.n_items = len(cand_items)
    row.n_paired = len(paired)
    row.n_unpaired = len(cand_items.keys() ^ base_items.keys())
    row.missing_items = sorted(base_items.keys() - {record.item_id for record in candidate})
    repeats = Counter(record.item_id for record in candidate)
    row.short_items = sorted(item for item, count in repeats.items() if count < runs_per_item)
    row.expected_repeats = runs_per_item
    row.candidate_mean = _mean(cand_items.values()) if cand_items else None
    row.baseline_mean = _mean(base_items.values()) if base_items else None
    row.delta = float(deltas.mean()) if paired else None
    return _Measurement(metric=metric, row=row, deltas=deltas, undecided=why_undecided)


def _undecided(records: Sequence[ScoreRecord]) -> str:
    """`N attempts could not be decided (cannot_decide: reason)`, the first reason shown."""
    labels = Counter(record.label or "no value" for record in records)
    kinds = ", ".join(f"{label} {count}" for label, count in sorted(labels.items()))
    first = next((r.explanation for r in records if r.explanation), "")
    why = f": {first}" if first else ""
    return f"{len(records)} attempts could not be decided ({kinds}{why}), counted apart"


def _decide(measurement: _Measurement, calibrated: bool, confidence: float) -> GateRow:
    """Pass or fail a measured row: scores present and decided, judge calibrated,
    threshold, regression."""
    metric, row = measurement.metric, measurement.row
    if row.candidate_mean is None:
        return row  # already failed with NO_SCORES (or no decided scores)
    failures = _coverage_failures(row)
    if measurement.undecided:
        failures.append(measurement.undecided)
    if metric.is_judge and not calibrated:
        failures.append(UNCALIBRATED)
    if row.candidate_mean < metric.threshold:
        failures.append(f"mean {row.candidate_mean:.4f} below threshold {metric.threshold:g}")
    if metric.max_regression is not None:
        failures.extend(_regression_failures(row, metric.max_regression, confidence))
    row.passed = not failures
    row.reason = "; ".join(failures) or "ok"
    return row


def _coverage_failures(row: GateRow) -> list[str]:
    """Scores the candidate lacks: whole items the baseline has, or repeats of an item (a
    crashed or unscored repeat must not vanish from the mean)."""
    failures = []
    if row.missing_items:
        failures.append(
            f"{len(row.missing_items)} items scored in the baseline have no candidate score "
            f"({_examples(row.missing_items)})"
        )
    if row.short_items:
        failures.append(
            f"{len(row.short_items)} items have fewer than {row.expected_repeats} scored "
            f"repeats ({_examples(row.short_items)})"
        )
    return failures


def _examples(items: Sequence[str], shown: int = 3) -> str:
    """The first `shown` items, then how many more."""
    more = f", +{len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _regression_failures(row: GateRow, max_regression: float, confidence: float) -> list[str]:
    """Why the paired interval breaks `max_regression`, if it does."""
    if row.interval is None:
        return ["no paired baseline items: cannot check max_regression"]
    low = row.interval[0]
    if low < -max_regression:
        return [
            f"regression: {confidence:.0%} interval lower bound {low:+.4f} "
            f"below -{max_regression:g}"
        ]
    return []


def _budget_rows(suite: Suite, budgets: BudgetObservations | None) -> list[GateRow]:
    """p95 latency and mean cost per task against the suite's budgets (no data: fail)."""
    limits = suite.budgets
    if limits is None:
        return []
    observed = budgets or BudgetObservations(latencies_s=(), costs_usd=())
    rows: list[GateRow] = []
    if limits.p95_latency_s is not None:
        rows.append(_budget_row("p95_latency_s", limits.p95_latency_s, observed.latencies_s, "p95"))
    if limits.cost_per_task_usd is not None:
        rows.append(
            _budget_row("cost_per_task_usd", limits.cost_per_task_usd, observed.costs_usd, "mean")
        )
    return rows


def _budget_row(name: str, limit: float, values: Sequence[float], statistic: str) -> GateRow:
    """One budget: the statistic (p95 or mean, numpy's linear percentile) must not exceed it."""
    row = GateRow(check="budget", metric=name, threshold=limit, passed=False, reason="")
    observed = np.asarray(values, dtype=np.float64)
    if observed.size == 0:
        row.reason = f"no observations for {name}: treat as failure"
        return row
    if not np.all(np.isfinite(observed)):
        row.reason = f"{name} observations include a non-finite value"
        return row
    value = float(np.percentile(observed, 95) if statistic == "p95" else observed.mean())
    row.n_items = int(observed.size)
    row.candidate_mean = value
    row.passed = value <= limit
    row.reason = "ok" if row.passed else f"{statistic} {value:.4g} over budget {limit:g}"
    return row


def _mean(values: Iterable[float]) -> float:
    collected = list(values)
    return math.fsum(collected) / len(collected)
