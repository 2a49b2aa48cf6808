"""docs/frameworks.md says what the matrix's recorded results say (no stack needed)."""

from __future__ import annotations

from tests.integration.frameworks import matrix_doc
from tests.integration.frameworks.environments import ENVIRONMENTS


def test_frameworks_doc_is_rendered_from_the_recorded_results() -> None:
    results = matrix_doc.load()
    assert [r["slug"] for r in results] == list(ENVIRONMENTS), "a framework has no results"
    text = matrix_doc.render(results)
    assert all(f"| {r['framework']} |" in text for r in results)
    stale = matrix_doc.DOC.read_text() != text
    assert not stale, "run `python -m tests.integration.frameworks.matrix_doc --write`"
