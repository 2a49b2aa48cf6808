"""A bench script as a module, for tests of what it holds: bench/ingest.py's request bodies
run through a fast path and its twin, bench/mutation_rules.py's rules (benches are scripts,
not a package)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from tests.support.paths import REPO_ROOT


def load_bench(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/`name`.py loaded fresh, registered in `sys.modules` for the test (dataclasses
    look their module up) and removed after it."""
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", REPO_ROOT / "bench" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
