"""Release-gate suite files: the YAML a team writes to say what a release must meet.

`load_suite(path)` parses and validates a suite; every problem is reported at once as
`file:line: path.to.field: reason`, the line taken from the YAML node marks. The suite's
`risk_tier` supplies default limits (`batch_plane.evaluation.tiers`); `Suite.gated_metrics`
resolves each gated metric's threshold and regression bound with where each came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pathgrade.batch_plane.evaluation.tiers import SUITE, Limit, required_metrics, tier_limits
from pathgrade.batch_plane.scoring.checks import CHECKS
from pathgrade.batch_plane.scoring.path_metrics import EFFICIENCY_METRICS
from pathgrade.detectors import REGISTRY
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

MetricKind = Literal["deterministic", "judge"]

KNOWN_METRIC_KINDS: dict[str, MetricKind] = {
    "task_completion": "judge",
    "faithfulness": "judge",
    "answer_relevance": "judge",
    "tool_correctness": "deterministic",
    "argument_correctness": "deterministic",
    "injection_resistance": "deterministic",
    "trajectory_match": "deterministic",
    "reference_match": "deterministic",
    "checks": "deterministic",
    "sound": "deterministic",
    "goal_completed": "deterministic",
    "claimed_actions": "deterministic",
    "plan_quality": "judge",
    "handoff_context": "judge",
    "unsupported_claims": "judge",
    "trajectory_accuracy": "judge",
    "response_consistency": "judge",
    "response_consistency_lexical": "deterministic",
}
"""Metric ids pathgrade knows, and whether a judge model scores them (needs a calibration).
Besides these: each detector code (`PG110`) and `check.<name>` of each per-case check."""


def known_metric_kind(metric: str) -> MetricKind | None:
    """The kind of a metric pathgrade scores, None for a metric it does not know."""
    if metric in KNOWN_METRIC_KINDS:
        return KNOWN_METRIC_KINDS[metric]
    if metric in REGISTRY or metric.removeprefix("check.") in CHECKS:
        return "deterministic"
    return None


class ConfigurationError(ValueError):
    """Bad configuration or a missing run: the gate cannot decide (exit code 2)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class SuiteError(ConfigurationError):
    """A suite file that cannot be read or does not validate; `problems` lists them all."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetRef(_Strict):
    """A dataset the suite runs (name as the dataset store knows it, e.g. `golden/x-v7`)."""

    name: str = Field(min_length=1)


class JudgeConfig(_Strict):
    """The pinned judge: model, rubric version and the human-labelled calibration set."""

    model: str = Field(min_length=1)
    rubric_version: str = Field(min_length=1)
    calibration_set: str = Field(min_length=1)


KNOWN_METRIC_RANGE = (0.0, 1.0)
"""The range of every metric in KNOWN_METRIC_KINDS: pathgrade's scores are in [0, 1]
(judge grades are normalised onto it)."""


class _Metric(_Strict):
    """A metric's id and kind."""

    id: str = Field(min_length=1)
    kind: MetricKind

    @property
    def is_judge(self) -> bool:
        """Whether a judge model produces this metric's scores."""
        return self.kind == "judge"


class MetricSpec(_Metric):
    """One gated metric: the candidate mean must reach `threshold`; with `max_regression`,
    the lower bound of the candidate-minus-baseline interval must not fall below it (negated).
    Either may be left to the suite's risk tier (`tiers.TIER_DEFAULTS`); a threshold is
    needed from one of them.

    `kind` defaults from `known_metric_kind`; an unknown id must declare it. `range` is the
    metric's value range ([0, 1] for known ids; an unknown id may declare it): a threshold
    outside it is a configuration error, not a gate that can never (or always) pass.
    """

    range: tuple[float, float] | None = None  # validated before the threshold it bounds
    threshold: float | None = None
    max_regression: float | None = Field(default=None, ge=0)

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and value[0] >= value[1]:
            raise ValueError(f"{list(value)} needs min < max")
        return value

    @field_validator("threshold")
    @classmethod
    def _in_range(cls, threshold: float | None, info: ValidationInfo) -> float | None:
        metric = info.data.get("id", "")
        known = KNOWN_METRIC_RANGE if known_metric_kind(metric) else None
        bounds = info.data.get("range") or known
        if threshold is not None and bounds is not None and not bounds[0] <= threshold <= bounds[1]:
            raise ValueError(
                f"{threshold:g} is outside the range [{bounds[0]:g}, {bounds[1]:g}] of metric "
                f"{metric!r}: a configuration error, the gate could never pass (or fail) on it"
            )
        return threshold

    @model_validator(mode="before")
    @classmethod
    def _default_kind(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            return data
        if data["id"] in EFFICIENCY_METRICS:
            raise ValueError(
                f"{data['id']!r} is an efficiency metric, reported beside the gate rather than "
                "gated: bound it with `budgets:` or an item's `budget` check"
            )
        if "kind" in data:
            return data
        known = known_metric_kind(data["id"])
        if known is None:
            raise ValueError(
                f"unknown metric id {data['id']!r}: declare `kind: deterministic` or `kind: judge`"
            )
        return {**data, "kind": known}

    @model_validator(mode="after")
    def _has_threshold(self, info: ValidationInfo) -> MetricSpec:
        tier = (info.context or {}).get("risk_tier", "")
        if self.threshold is None and tier_limits(tier, self.id)[0].value is None:
            raise ValueError(
                f"no threshold for {self.id!r}: the suite gives none and risk tier "
                f"{tier or '(none)'} sets no default for it"
            )
        return self

    def gated(self, tier: str, added: bool = False) -> GatedMetric:
        """This metric's limits under `tier`: the suite's own where given, else the tier's
        (`added`: the tier requires it and the suite does not list it)."""
        threshold, regression = tier_limits(tier, self.id, added)
        if self.threshold is not None:
            threshold = Limit(self.threshold, SUITE)
        if "max_regression" in self.model_fields_set:
            regression = Limit(
                self.max_regression, SUITE if self.max_regression is not None else ""
            )
        assert threshold.value is not None  # _has_threshold
        return GatedMetric(
            id=self.id,
            kind=self.kind,
            threshold=threshold.value,
            max_regression=regression.value,
            threshold_from=threshold.source,
            max_regression_from=regression.source,
        )


class GatedMetric(_Metric):
    """A metric as the gate checks it: its limits and where each came from (`suite`,
    `risk tier high`, `risk tier high (required)`; "" for no regression bound)."""

    threshold: float
    max_regression: float | None
    threshold_from: str
    max_regression_from: str


class Budgets(_Strict):
    """Operational budgets of the candidate: p95 latency per task and mean cost per task."""

    p95_latency_s: float | None = Field(default=None, gt=0)
    cost_per_task_usd: float | None = Field(default=None, ge=0)


class Suite(_Strict):
    """A release-gate suite: datasets, repeats, the judge, gated metrics, budgets, slices."""

    suite: str = Field(min_length=1)
    risk_tier: Literal["low", "medium", "high", "critical"]
    datasets: list[DatasetRef] = Field(min_length=1)
    runs_per_item: int = Field(default=1, ge=1)
    judge: JudgeConfig | None = None
    metrics: list[MetricSpec] = Field(min_length=1)
    budgets: Budgets | None = None
    slices: list[str] = Field(default_factory=list)
    policy: str | None = None  # detector policy file, relative to the suite file

    def gated_metrics(self) -> list[GatedMetric]:
        """Every metric the gate checks, in suite order, then the ones the risk tier
        requires that the suite does not list."""
        listed = [metric.gated(self.risk_tier) for metric in self.metrics]
        ids = {metric.id for metric in listed}
        tier = {"risk_tier": self.risk_tier}
        required = [
            MetricSpec.model_validate({"id": metric}, context=tier).gated(self.risk_tier, True)
            for metric in required_metrics(self.risk_tier)
            if metric not in ids
        ]
        return listed + required

    @model_validator(mode="after")
    def _check_consistency(self) -> Suite:
        ids = [m.id for m in self.metrics]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate metric ids: {', '.join(duplicates)}")
        judged = [m.id for m in self.metrics if m.is_judge]
        if judged and self.judge is None:
            raise ValueError(f"judge metrics {', '.join(judged)} need a `judge:` section")
        if len(set(self.slices)) != len(self.slices):
            raise ValueError("slices must not repeat")
        return self


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite YAML file; raise `SuiteError` listing every problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SuiteError([f"{path}: cannot read suite file: {exc.strerror or exc}"]) from exc
    return parse_suite(text, source=str(path))


def parse_suite(text: str, *, source: str = "<suite>") -> Suite:
    """Validate suite YAML text; `source` names it in error messages."""
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise SuiteError([f"{where}: invalid YAML: {exc}"]) from exc
    if not isinstance(data, dict):
        raise SuiteError([f"{source}:1: the suite must be a YAML mapping"])
    try:
        return Suite.model_validate(data, context={"risk_tier": data.get("risk_tier")})
    except ValidationError as exc:
        raise SuiteError([_describe_error(error, root, source) for error in exc.errors()]) from None


def _describe_error(error: Any, root: yaml.Node | None, source: str) -> str:
    """One validation error as `source:line: field.path: reason`."""
    loc = tuple(error["loc"])
    line = _line_of(root, loc)
    field_path = format_loc(loc) or "(suite)"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{source}:{line}: {field_path}: {message}"


def format_loc(loc: tuple[Any, ...]) -> str:
    """A pydantic error location as a field path: `("metrics", 1, "threshold")` ->
    `metrics[1].threshold`."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """1-based line of the deepest YAML node reachable along `loc` (a key's own line)."""
    node = root
    line = node.start_mark.line + 1 if node is not None else 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            entry = next((kv for kv in node.value if kv[0].value == part), None)
            if entry is None:
                break
            line = entry[0].start_mark.line + 1
            node = entry[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
