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
    collected = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in request.session.items))
    longest = [path for path in LONGEST_MODULES if path in collected]  # all, in the whole suite
    assert collected[: len(longest)] == longest
