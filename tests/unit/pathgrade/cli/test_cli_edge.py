"""`pathgrade edge` commands that need no store: paths printed as text, bad input named."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathgrade.cli.main import main
from tests.support.paths import REPO_ROOT

GRAPH = REPO_ROOT / "examples" / "recruitment" / "graph_constrained.json"


def test_edge_paths_text_prints_every_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["edge", "paths", str(GRAPH), "--out", str(tmp_path / "s.jsonl")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"6 paths; scenarios written to {tmp_path / 's.jsonl'}"
    assert lines[0] == "topic_selector > job_inquiry > screening > killer_questions > finalize"
    assert len(lines) == 7 and all(line.startswith("topic_selector > ") for line in lines[:-1])


def test_edge_recommend_names_a_node_the_graph_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["edge", "recommend", "--graph", str(GRAPH), "--path", "topic_selector,nowhere",
                 "--since", "1d", "--data-dir", str(tmp_path / "none")])  # fmt: skip
    assert code == 2
    assert "--path: node 'nowhere' is not in the graph" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()  # refused before the store is opened
