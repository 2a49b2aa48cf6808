"""Calibration statistics, the labels file and the stored calibration status."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest
from pathgrade.batch_plane.scoring.calibration import (
    LabelsError,
    calibrate,
    calibration_status,
    cohen_kappa,
    false_pass_rate,
    labels_digest,
    load_labels,
    repeat_variance,
    store_calibration,
)
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.store.client import ClientStore

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.openai_standin import OpenAIStandIn

RUBRIC = load_rubric("faithfulness@1")


def test_cohen_kappa_known_values() -> None:
    # 2x2 table: both pass 20, judge-only 5, human-only 10, both fail 15 -> kappa 0.4
    judge = [True] * 20 + [True] * 5 + [False] * 10 + [False] * 15
    human = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert cohen_kappa(judge, human) == pytest.approx(0.4)
    assert cohen_kappa([True, True], [True, True]) == 1.0
    assert cohen_kappa([True, False], [False, True]) == pytest.approx(-1.0)


def test_false_pass_rate_and_variance() -> None:
    assert false_pass_rate([True, True, False], [False, True, False]) == 0.5
    assert math.isnan(false_pass_rate([True], [True]))
    assert repeat_variance([[0.0, 1.0], [1.0, 1.0]]) == pytest.approx(0.125)


def write_labels(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def item(item_id: str, label: object, answer: str = "a") -> dict[str, object]:
    return {
        "item_id": item_id,
        "input": {"question": "q", "answer": answer, "tool_results": []},
        "label": label,
    }


def test_labels_errors_name_line_and_field(tmp_path: Path) -> None:
    path = write_labels(
        tmp_path / "human.jsonl",
        [item("a", "pass"), {"item_id": "b", "input": {}}, item("a", "maybe"), item("c", 7)],
    )
    with pytest.raises(LabelsError) as error:
        load_labels(path, RUBRIC)
    message = str(error.value)
    assert f"{path}:2: label: Field required" in message
    assert f"{path}:3: item_id: 'a' repeats an earlier line" in message
    assert f"{path}:3: label: must be 'pass', 'fail' or a score" in message
    assert f"{path}:4: label: 7.0 is outside the faithfulness@1 scale 1..4" in message


def test_calibrate_against_standin_and_store(tmp_path: Path, store: ClientStore) -> None:
    labels = load_labels(
        write_labels(
            tmp_path / "human.jsonl",
            [
                item("1", "pass", "good"),
                item("2", "fail", "bad"),
                item("3", 4, "good2"),
                item("4", 1, "bad2"),
            ],
        ),
        RUBRIC,
    )

    def answer(request: dict) -> dict:  # passes answers containing "good"
        good = "good" in request["messages"][0]["content"]
        return {"score": 4 if good else 1, "explanation": "scripted"}

    model = f"judge-{uuid.uuid4().hex[:8]}"
    with OpenAIStandIn(answer=answer) as server:
        judge = Judge(JudgeEndpoint(server.url, model), store=store)
        result = calibrate(judge, RUBRIC, labels, repeats=2, labels_sha256=labels_digest(labels))
        assert len(server.requests) == 8  # 4 items x 2 repeats
    assert (result.agreement, result.kappa, result.false_pass_rate) == (1.0, 1.0, 0.0)
    assert result.judge_variance == 0.0 and result.items == 4
    assert not calibration_status(store, model, RUBRIC.ref)
    store_calibration(store, result)
    assert calibration_status(store, model, RUBRIC.ref)
    assert not calibration_status(store, model, "faithfulness@2")
