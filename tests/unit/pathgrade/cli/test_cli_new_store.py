"""`dataset`, `eval`, `gate` and `edge` on a data directory without a store create the
embedded store (migrated, as `migrate` does) instead of asking for `pathgrade up`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

SEEDED = REPO_ROOT / "examples" / "seeded_defects"


def pathgrade(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def test_dataset_import_creates_the_store_and_later_commands_read_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "new"
    imported = pathgrade(
        data_dir, "dataset", "import", "golden/support-seeded", str(SEEDED / "golden.jsonl"),
        "--publish",
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert (data_dir / "clickhouse").is_dir()
    listed = pathgrade(data_dir, "dataset", "list")
    assert listed.returncode == 0, listed.stderr
    assert "golden/support-seeded" in listed.stdout and "published" in listed.stdout


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["gate", str(SEEDED / "suite.yaml"), "--candidate", "c", "--baseline", "b"], 2,
         "not in the store"),
        (["eval", str(SEEDED / "suite.yaml"), "--agent", f"{SEEDED / 'agent.py'}:healthy",
          "--otlp", "http://127.0.0.1:9"], 1, "golden/support-seeded"),
        (["edge", "report", "edge-none"], 1, "edge-none"),
    ],
)  # fmt: skip
def test_eval_gate_and_edge_on_a_new_directory_reach_their_own_question(
    tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    """The store is created, so what the command says is about its own input (a run or
    dataset that is not there), never that there is no store."""
    data_dir = tmp_path / "new"
    done = pathgrade(data_dir, *args)
    assert (data_dir / "clickhouse").is_dir()
    assert "no store" not in done.stderr
    assert done.returncode == code and says in done.stderr, done.stderr
