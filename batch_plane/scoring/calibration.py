"""Judge calibration against human labels, stored per (judge model, rubric version).

Labels file (JSONL, one item a line):
    {"item_id": "support-17", "input": {"question": ..., "answer": ..., ...}, "label": "pass"}
`input` holds the rubric's inputs; `label` is "pass", "fail" or a score on the rubric's
scale (passing at `scale.pass_at`). The judge grades every item `repeats` times; stored are
agreement and Cohen's kappa of the judge's first verdict with the humans (pass/fail), the
false-pass rate (share of human-failed items the judge passed; NaN without any) and the
judge's variance (mean over items of the variance of its normalised scores over repeats).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import pvariance
from typing import Any

from pathgrade.batch_plane.scoring.judge import Judge, now_ms
from pathgrade.batch_plane.scoring.rubrics import Rubric
from pathgrade.batch_plane.store.judges import calibrated
from pathgrade.schemas.store import Store
from pydantic import BaseModel, ConfigDict, Field, ValidationError

CALIBRATION_COLUMNS = (
    "Model", "RubricVersion", "LabelsSha256", "Items", "Repeats", "Agreement", "Kappa",
    "FalsePassRate", "JudgeVariance", "CreatedAt",
)  # fmt: skip


class LabelsError(ValueError):
    """A labels file that cannot be used; the message names each bad line and field."""


class HumanLabel(BaseModel):
    """One human-labelled item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item_id: str = Field(min_length=1)
    input: dict[str, Any]
    label: str | float

    def passed(self, rubric: Rubric) -> bool:
        if isinstance(self.label, str):
            return self.label == "pass"
        return self.label >= rubric.scale.pass_at


def load_labels(path: str | Path, rubric: Rubric) -> list[HumanLabel]:
    """Read and check a labels file for `rubric`; LabelsError lists every problem."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read labels: {exc.strerror or exc}") from exc
    labels, problems, seen = [], [], set()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            label = HumanLabel.model_validate_json(line)
        except ValidationError as exc:
            problems += [
                f"{where}: {'.'.join(map(str, e['loc'])) or '(line)'}: {e['msg']}"
                for e in exc.errors()
            ]
            continue
        problems += _label_problems(label, rubric, where, seen)
        seen.add(label.item_id)
        labels.append(label)
    if not labels and not problems:
        problems.append(f"{path}: no labelled items")
    if problems:
        raise LabelsError("\n".join(problems))
    return labels


def _label_problems(label: HumanLabel, rubric: Rubric, where: str, seen: set[str]) -> list[str]:
    problems = []
    if label.item_id in seen:
        problems.append(f"{where}: item_id: {label.item_id!r} repeats an earlier line")
    if isinstance(label.label, str) and label.label not in ("pass", "fail"):
        problems.append(f"{where}: label: must be 'pass', 'fail' or a score, got {label.label!r}")
    elif not isinstance(label.label, str) and not (
        rubric.scale.min <= label.label <= rubric.scale.max
    ):
        problems.append(
            f"{where}: label: {label.label} is outside the {rubric.ref} scale "
            f"{rubric.scale.min}..{rubric.scale.max}"
        )
    missing = [name for name in rubric.inputs if name not in label.input]
    if missing:
        problems.append(f"{where}: input: missing {', '.join(missing)} (needed by {rubric.ref})")
    return problems


@dataclass(frozen=True)
class Calibration:
    """Agreement of one judge model and rubric version with a human-labelled set."""

    model: str
    rubric_version: str
    labels_sha256: str
    items: int
    repeats: int
    agreement: float
    kappa: float
    false_pass_rate: float
    judge_variance: float


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float:
    """Cohen's kappa of two raters' pass/fail decisions (1.0 when both are constant and agree)."""
    n = len(first)
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    p1, p2 = sum(first) / n, sum(second) / n
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    if expected == 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - expected) / (1 - expected)


def false_pass_rate(judge: Sequence[bool], human: Sequence[bool]) -> float:
    """Share of the items humans failed that the judge passed; NaN when humans failed none."""
    failed = [j for j, h in zip(judge, human, strict=True) if not h]
    return sum(failed) / len(failed) if failed else math.nan


def repeat_variance(scores: Sequence[Sequence[float]]) -> float:
    """Mean over items of the population variance of each item's scores over repeats."""
    return sum(pvariance(s) if len(s) > 1 else 0.0 for s in scores) / len(scores)


def calibrate(
    judge: Judge,
    rubric: Rubric,
    labels: Sequence[HumanLabel],
    repeats: int = 1,
    labels_sha256: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> Calibration:
    """Grade every labelled item `repeats` times and compare with the humans."""
    jobs = [(i, k) for i in range(len(labels)) for k in range(repeats)]
    done = itertools.count(1)

    def grade(job: tuple[int, int]) -> float:
        index, repeat = job
        result = judge.evaluate(rubric, labels[index].input, repeat=repeat)
        if progress:
            progress(next(done), len(jobs))
        return result.verdict.score

    with ThreadPoolExecutor(max_workers=judge.endpoint.concurrency) as pool:
        raw = list(pool.map(grade, jobs))
    per_item = [raw[i * repeats : (i + 1) * repeats] for i in range(len(labels))]
    judge_pass = [s[0] >= rubric.scale.pass_at for s in per_item]
    human_pass = [label.passed(rubric) for label in labels]
    agreement = sum(j == h for j, h in zip(judge_pass, human_pass, strict=True)) / len(labels)
    return Calibration(
        model=judge.endpoint.model,
        rubric_version=rubric.ref,
        labels_sha256=labels_sha256,
        items=len(labels),
        repeats=repeats,
        agreement=agreement,
        kappa=cohen_kappa(judge_pass, human_pass),
        false_pass_rate=false_pass_rate(judge_pass, human_pass),
        judge_variance=repeat_variance(
            [[rubric.scale.normalise(s) for s in scores] for scores in per_item]
        ),
    )


def labels_digest(labels: Sequence[HumanLabel]) -> str:
    """Hex sha256 of the labelled set, recorded with its calibration."""
    text = "\n".join(json.dumps(label.model_dump(), sort_keys=True) for label in labels)
    return hashlib.sha256(text.encode()).hexdigest()


def store_calibration(store: Store, calibration: Calibration) -> None:
    c = calibration
    row = [
        c.model, c.rubric_version, c.labels_sha256, c.items, c.repeats, c.agreement, c.kappa,
        c.false_pass_rate, c.judge_variance, now_ms(),
    ]  # fmt: skip
    store.insert("judge_calibrations", [row], list(CALIBRATION_COLUMNS))


def calibration_status(store: Store, model: str, rubric_version: str) -> bool:
    """Whether (judge model, rubric version) has a stored calibration: without one a judge
    metric is reported as uncalibrated and cannot gate."""
    return calibrated(store, model, rubric_version)
