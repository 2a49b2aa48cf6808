"""Versioned rubric files and their loader."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.scoring.rubrics import (
    RubricError,
    load_rubric,
    parse_rubric,
    rubric_files,
)

EXPECTED = {
    "task_completion", "faithfulness", "plan_quality", "trajectory_accuracy",
    "response_consistency", "unsupported_claims", "handoff_context", "context_precision",
    "context_recall",
}  # fmt: skip


def test_every_shipped_rubric_loads_and_names_its_version() -> None:
    assert {rubric_id for rubric_id, _ in rubric_files()} == EXPECTED
    for rubric_id, version in rubric_files():
        rubric = load_rubric(f"{rubric_id}@{version}")
        assert rubric.ref == f"{rubric_id}@{version}"
        first = "verdicts" if rubric.verdicts is not None else "score"
        assert rubric.output_schema["required"][0] == first


def test_response_consistency_uses_the_edge_1_to_4_scale() -> None:
    scale = load_rubric("response_consistency").scale
    assert (scale.min, scale.max) == (1, 4)
    assert scale.normalise(4) == 1.0 and scale.normalise(1) == 0.0


def test_unknown_rubric_and_version_are_named() -> None:
    with pytest.raises(RubricError, match="unknown rubric 'nope'"):
        load_rubric("nope")
    with pytest.raises(RubricError, match="has no version '9'"):
        load_rubric("faithfulness@9")


def test_render_names_missing_inputs_and_keeps_braces() -> None:
    rubric = load_rubric("plan_quality@1")
    with pytest.raises(RubricError, match="missing input\\(s\\) tool_calls"):
        rubric.render({"question": "q"})
    text = rubric.render({"question": "use {x}", "tool_calls": [{"name": "a"}]})
    assert "use {x}" in text and '[{"name": "a"}]' in text


def _rubric_yaml(layer: str = "answer", prompt: str = "${question}", extra: str = "") -> str:
    """A one-input rubric's YAML, with the parts a test varies."""
    return f"""
id: bad
version: 1
description: d
layer: {layer}
scale: {{min: 0, max: 1, pass_at: 1}}
inputs: [question]
{extra}
prompt: "{prompt}"
output_schema: {{type: object}}
"""


def test_placeholders_must_match_declared_inputs() -> None:
    text = _rubric_yaml(prompt="${answer}")
    with pytest.raises(RubricError, match="placeholders \\['answer'\\] differ"):
        parse_rubric(text, "bad.v1.yaml")


def test_a_rubric_declares_a_known_layer() -> None:
    text = _rubric_yaml(layer="vibes")
    with pytest.raises(RubricError, match="layer"):
        parse_rubric(text, "bad.v1.yaml")
    assert load_rubric("plan_quality@1").layer == "plan"


def test_a_verdict_list_rubric_must_grade_one_of_its_inputs() -> None:
    verdicts = "verdicts: {per: contexts, aggregate: context_precision}"
    text = _rubric_yaml("retrieval", extra=verdicts)
    with pytest.raises(RubricError, match=r"verdicts\.per 'contexts' is not one of the inputs"):
        parse_rubric(text, "bad.v1.yaml")
