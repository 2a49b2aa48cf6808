"""Release-gate suite files: the YAML a team writes to say what a release must meet.

`load_suite(path)` parses and validates a suite; every problem is reported at once as
`file:line: path.to.field: reason`, the line taken from the YAML node marks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
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
    "regression_check": "deterministic",
    "claimed_actions": "deterministic",
    "plan_quality": "judge",
    "unsupported_claims": "judge",
    "trajectory_accuracy": "judge",
    "response_consistency": "judge",
    "response_consistency_lexical": "deterministic",
}
"""Metric ids pathgrade knows, and whether a judge model scores them (needs a calibration)."""


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


class MetricSpec(_Strict):
    """One gated metric: the candidate mean must reach `threshold`; with `max_regression`,
    the lower bound of the candidate-minus-baseline interval must not fall below it (negated).

    `kind` defaults from `KNOWN_METRIC_KINDS`; an unknown id must declare it. `range` is the
    metric's value range ([0, 1] for known ids; an unknown id may declare it): a threshold
    outside it is a configuration error, not a gate that can never (or always) pass.
    """

    id: str = Field(min_length=1)
    range: tuple[float, float] | None = None  # validated before the threshold it bounds
    threshold: float
    max_regression: float | None = Field(default=None, ge=0)
    kind: MetricKind

    @field_validator("range")
    @classmethod
    def _ordered(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and value[0] >= value[1]:
            raise ValueError(f"{list(value)} needs min < max")
        return value

    @field_validator("threshold")
    @classmethod
    def _in_range(cls, threshold: float, info: ValidationInfo) -> float:
        metric = info.data.get("id", "")
        known = KNOWN_METRIC_RANGE if metric in KNOWN_METRIC_KINDS else None
        bounds = info.data.get("range") or known
        if bounds is not None and not bounds[0] <= threshold <= bounds[1]:
            raise ValueError(
                f"{threshold:g} is outside the range [{bounds[0]:g}, {bounds[1]:g}] of metric "
                f"{metric!r}: a configuration error, the gate could never pass (or fail) on it"
            )
        return threshold

    @model_validator(mode="before")
    @classmethod
    def _default_kind(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "kind" in data or not isinstance(data.get("id"), str):
            return data
        known = KNOWN_METRIC_KINDS.get(data["id"])
        if known is None:
            raise ValueError(
                f"unknown metric id {data['id']!r}: declare `kind: deterministic` or `kind: judge`"
            )
        return {**data, "kind": known}

    @property
    def is_judge(self) -> bool:
        """Whether a judge model produces this metric's scores."""
        return self.kind == "judge"


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
        return Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError([_describe_error(error, root, source) for error in exc.errors()]) from None


def _describe_error(error: Any, root: yaml.Node | None, source: str) -> str:
    """One validation error as `source:line: field.path: reason`."""
    loc = tuple(error["loc"])
    line = _line_of(root, loc)
    field_path = _format_loc(loc) or "(suite)"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{source}:{line}: {field_path}: {message}"


def _format_loc(loc: tuple[Any, ...]) -> str:
    """`("metrics", 1, "threshold")` -> `metrics[1].threshold`."""
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
