"""pathgrade's context precision and recall against DeepEval's `ContextualPrecisionMetric`
and `ContextualRecallMetric` themselves: DeepEval (not a test dependency: it brings its
own pytest plugins and telemetry) runs offline in a venv of its own, created from PyPI on
first use and cached like the framework matrix's (tests/integration/frameworks/
environments.py), its judge a scripted model that returns the verdicts each case is made
of. Every generated verdict list must score the same on both sides."""

from __future__ import annotations

import json
import os
import random
import subprocess

import pytest
from pathgrade.batch_plane.scoring.retrieval import context_precision, context_recall

from tests.integration.frameworks.environments import Environment
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

DEEPEVAL = Environment("deepeval", "unused", ("deepeval==4.3.1",))
"""The release whose code docs/trajectory.md's differences were checked against."""


def test_deepeval_scores_the_verdicts_as_pathgrade_does() -> None:
    rng = random.Random(44)
    lists = [[rng.random() < 0.5 for _ in range(rng.randint(1, 7))] for _ in range(60)]
    lists += [[True], [False], [False, True], [True, False, False, True]]
    python, _ = DEEPEVAL.python()
    done = subprocess.run(
        [python, "-m", "tests.integration.reference.deepeval_scores"],
        input=json.dumps({"precision": lists, "recall": lists}),
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    scores = json.loads(done.stdout)
    assert scores["precision"] == pytest.approx([context_precision(v) for v in lists])
    assert scores["recall"] == pytest.approx([context_recall(v) for v in lists])
    assert scores["precision"][-2] == pytest.approx(0.5)  # the relevant chunk second
