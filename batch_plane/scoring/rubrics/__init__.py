"""Versioned judge rubrics: `<id>.v<version>.yaml` files beside this module.

A rubric holds its id, version, the layer of the agent it grades (`schemas.layers`), the
score scale (`min`, `max`, `pass_at`), the inputs its
prompt template needs (`${name}` placeholders), the prompt and the JSON Schema of the
judge's answer. A verdict-list rubric (`verdicts`) asks for one 0/1 verdict per item of
one input instead of a score: the answer must hold exactly one per item, and the score is
computed from them (`Rubric.output_score`). A rubric change is a new file with a new
version; `Rubric.ref` (`faithfulness@1`) is the rubric version recorded with every score,
cache entry and calibration.
"""

from __future__ import annotations

import json
import re
import string
from functools import cache
from importlib import resources
from typing import Any, Literal

import yaml
from pathgrade.batch_plane.scoring.retrieval import context_precision, context_recall
from pathgrade.detectors.jsonschema_subset import validate
from pathgrade.schemas.layers import Layer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

_FILE_NAME = re.compile(r"^([a-z0-9_]+)\.v(\d+)\.yaml$")


class RubricError(ValueError):
    """A rubric that cannot be found or does not validate."""


class Scale(BaseModel):
    """The judge's score range; a score `>= pass_at` passes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int
    max: int
    pass_at: int

    @model_validator(mode="after")
    def _ordered(self) -> Scale:
        if not self.min < self.max or not self.min <= self.pass_at <= self.max:
            raise ValueError(f"scale needs min < max and min <= pass_at <= max, got {self}")
        return self

    def normalise(self, score: float) -> float:
        """`score` mapped onto [0, 1]."""
        return (score - self.min) / (self.max - self.min)


VERDICT_AGGREGATES = {"context_precision": context_precision, "context_recall": context_recall}
"""How a verdict-list rubric turns its verdicts into a score (`batch_plane.scoring.retrieval`)."""


class VerdictList(BaseModel):
    """A rubric whose answer is `verdicts`, one `{"verdict": 0|1, ...}` per item of the
    input `per` (a list), in order; `aggregate` turns them into the score."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    per: str
    aggregate: Literal["context_precision", "context_recall"]


class Rubric(BaseModel):
    """One versioned rubric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    version: int = Field(ge=1)
    description: str
    layer: Layer
    scale: Scale
    inputs: tuple[str, ...] = Field(min_length=1)
    prompt: str
    output_schema: dict[str, Any]
    verdicts: VerdictList | None = None

    @model_validator(mode="after")
    def _verdicts_grade_an_input(self) -> Rubric:
        if self.verdicts is not None and self.verdicts.per not in self.inputs:
            raise ValueError(f"verdicts.per {self.verdicts.per!r} is not one of the inputs")
        return self

    @model_validator(mode="after")
    def _placeholders_are_inputs(self) -> Rubric:
        used = {m[1] or m[2] for m in string.Template.pattern.findall(self.prompt) if m[1] or m[2]}
        if used != set(self.inputs):
            raise ValueError(
                f"prompt placeholders {sorted(used)} differ from inputs {sorted(self.inputs)}"
            )
        return self

    @property
    def ref(self) -> str:
        """The rubric version as recorded with scores: `<id>@<version>`."""
        return f"{self.id}@{self.version}"

    def render(self, inputs: dict[str, Any]) -> str:
        """The prompt with `inputs` substituted (non-strings as JSON); names a missing input."""
        missing = [name for name in self.inputs if name not in inputs]
        if missing:
            raise RubricError(f"rubric {self.ref}: missing input(s) {', '.join(missing)}")
        values = {
            name: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for name, v in inputs.items()
            if name in self.inputs
        }
        return string.Template(self.prompt).substitute(values)

    def check_output(self, output: Any, inputs: dict[str, Any] | None = None) -> list[str]:
        """Schema violations of a judge answer, each naming the field (empty when valid);
        for a verdict-list rubric given its `inputs`, also a count of verdicts other than
        the number of items graded."""
        problems = validate(output, self.output_schema)
        if problems or self.verdicts is None or inputs is None:
            return problems
        graded = len(inputs[self.verdicts.per])
        given = len(output["verdicts"])
        if given != graded:
            return [f"verdicts: {given} given for {graded} {self.verdicts.per} (one each)"]
        return []

    def output_score(self, output: dict[str, Any]) -> float:
        """The score of a valid answer: its `score`, or for a verdict-list rubric the
        aggregate of its verdicts (ValueError when there is none to aggregate)."""
        if self.verdicts is None:
            return float(output["score"])
        flags = [entry["verdict"] for entry in output["verdicts"]]
        score = VERDICT_AGGREGATES[self.verdicts.aggregate](flags)
        if score is None:
            raise ValueError(f"rubric {self.ref}: no verdict to score")
        return score


def rubric_files() -> dict[tuple[str, int], str]:
    """(id, version) -> YAML text of every shipped rubric."""
    found = {}
    for entry in resources.files(__name__).iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found[(match[1], int(match[2]))] = entry.read_text(encoding="utf-8")
    return found


def parse_rubric(text: str, source: str) -> Rubric:
    """Validate one rubric document; errors name the source and field."""
    try:
        return Rubric.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise RubricError(f"{source}: invalid rubric: {exc}") from exc


@cache
def load_rubric(ref: str) -> Rubric:
    """The rubric `id@version`, or the newest version of `id`."""
    rubric_id, _, version = ref.partition("@")
    files = rubric_files()
    versions = sorted(v for i, v in files if i == rubric_id)
    if not versions:
        known = sorted({i for i, _ in files})
        raise RubricError(f"unknown rubric {rubric_id!r}; known: {', '.join(known)}")
    if version and (not version.isdigit() or int(version) not in versions):
        raise RubricError(f"rubric {rubric_id!r} has no version {version!r}; versions: {versions}")
    chosen = int(version) if version else versions[-1]
    rubric = parse_rubric(files[(rubric_id, chosen)], f"{rubric_id}.v{chosen}.yaml")
    if (rubric.id, rubric.version) != (rubric_id, chosen):
        raise RubricError(f"{rubric_id}.v{chosen}.yaml: declares {rubric.ref}")
    return rubric
