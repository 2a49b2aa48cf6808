"""bench/ingest.py as a module, for tests that run its request bodies through a fast path
and its twin (benches are scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support.paths import REPO_ROOT

INGEST_BENCH = REPO_ROOT / "bench" / "ingest.py"


def load_ingest_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/ingest.py loaded fresh, registered in `sys.modules` for the test (its
    dataclasses look their module up) and removed after it."""
    spec = importlib.util.spec_from_file_location("bench_ingest", INGEST_BENCH)
    assert spec is not None and spec.loader is not None
    ingest = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, ingest)
    spec.loader.exec_module(ingest)
    return ingest
