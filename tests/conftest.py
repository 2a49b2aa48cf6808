"""The whole suite's settings.

The suite starts several hundred Python interpreters (every stack's processes, every CLI
call, the frameworks' apps). With `PYTHONDONTWRITEBYTECODE` set in the environment (as on
some CI machines) each of them would compile pathgrade's sources again, about a quarter
of a second of CPU per interpreter; the suite writes bytecode caches (`__pycache__/`,
ignored by git) whatever that variable says, for itself and every process it starts.
"""

import os
import sys

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

LONGEST_MODULES = (
    "tests/integration/test_faults.py",
    "tests/integration/test_recovery.py",
    "tests/integration/test_resilience.py",
    "tests/integration/test_bench_smoke.py",
    "tests/integration/test_bench_smoke_store.py",
    "tests/integration/frameworks/test_matrix.py",
    "tests/unit/content/test_otlp_reader.py",
    "tests/integration/test_monitors.py",
    "tests/integration/test_demo_pages.py",
    "tests/integration/test_facts.py",
    "tests/integration/test_results_export.py",
    "tests/integration/test_ui_browser.py",
    "tests/integration/test_answer_bound.py",
    "tests/unit/batch_plane/evaluation/test_runs.py",
    "tests/integration/test_planted_values.py",
)
"""The modules that took longest in a clean-clone run (2026-12-07: 410 s down to 77 s of
tests each), longest first. The suite runs a module whole on one worker (`--dist loadfile`)
in collection order, so these are collected first: a long module started last would keep
one worker busy after the others ran out of work. A stale entry only costs that balance."""


def pytest_collection_modifyitems(items: list) -> None:
    """Collect LONGEST_MODULES first, in their order; every other module after them, in
    its own order (the sort is stable, so each module's tests keep theirs)."""
    rank = {path: position for position, path in enumerate(LONGEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
