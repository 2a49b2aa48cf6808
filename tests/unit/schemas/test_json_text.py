"""schemas.json_text answers as json does: the same values, the same errors, the same text."""

from __future__ import annotations

import json

import pytest
from pathgrade.schemas.json_text import loads, sorted_compact, sorted_text

TEXTS = [
    '{"a":1}', ' {"a":1}', '{"a":1} ', "[1,2] x", "nul", "", "\ufeff[1]", "NaN", '"s"', "1.0",
    '{"a":{"b":[1,2.5,"\\u00e9"]}}', '[{"role":"tool","parts":[]}]\n', "[1,", '{"a" 1}',
]  # fmt: skip


def _outcome(parse, text: str) -> tuple:
    try:
        return ("value", repr(parse(text)))
    except ValueError as exc:
        return ("error", type(exc).__name__, str(exc))


@pytest.mark.parametrize("text", TEXTS)
def test_loads_answers_as_json_loads(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)


VALUES = [
    {"b": 1, "a": [1.5, float("inf"), "é", None, True, -3]},
    'x\n"y"',
    1,
    [],
    {},
    {"z": {"y": 2, "x": 1}, "é": "ü"},
]


@pytest.mark.parametrize("value", VALUES)
def test_sorted_compact_writes_what_json_dumps_writes(value: object) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert sorted_compact(value) == expected


def test_sorted_compact_refuses_what_json_cannot_write() -> None:
    with pytest.raises(TypeError, match="object is not JSON serializable"):
        sorted_compact({"a": object()})


@pytest.mark.parametrize("value", [*VALUES, {"a": object, "b": {1: b"x"}}, (1, "t"), 2.5])
def test_sorted_text_writes_what_json_dumps_with_str_default_writes(value: object) -> None:
    assert sorted_text(value) == json.dumps(value, sort_keys=True, default=str)
