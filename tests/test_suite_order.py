"""The suite's own scheduling hint (`tests/conftest.py`): the modules it collects first
exist, each once, and come first in the collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LONGEST_MODULES

ROOT = Path(__file__).resolve().parent.parent


def test_every_longest_module_exists_once() -> None:
    missing = [path for path in LONGEST_MODULES if not (ROOT / path).is_file()]
    assert not missing, f"LONGEST_MODULES names modules that are not there: {missing}"
    assert len(set(LONGEST_MODULES)) == len(LONGEST_MODULES)


def test_the_longest_modules_are_collected_first(request: pytest.FixtureRequest) -> None:
    collected = [item.nodeid.split("::", 1)[0] for item in request.session.items]
    first = list(dict.fromkeys(collected))[: len(LONGEST_MODULES)]
    if len(first) < len(LONGEST_MODULES):  # a run of a few modules: their relative order
        first = [path for path in LONGEST_MODULES if path in collected]
        assert [path for path in dict.fromkeys(collected) if path in LONGEST_MODULES] == first
        return
    assert first == list(LONGEST_MODULES)
