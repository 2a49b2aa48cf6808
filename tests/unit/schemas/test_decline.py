"""The decide-or-decline contract and its parity harness (tests/support/parity.py)."""

from __future__ import annotations

import dataclasses

import pytest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from pathgrade.schemas.decline import Declined, declined

from tests.support.parity import Parity, differences

LATER = Declined("later")


@dataclasses.dataclass
class Pair:
    name: str
    score: float
    tags: dict[str, int]


def test_declined_is_told_by_class_and_carries_its_reason() -> None:
    assert declined(LATER) and LATER.reason == "later"
    assert not declined(None) and not declined(False) and not declined(b"")


def test_differences_name_every_field_that_differs() -> None:
    fast = [Pair("a", 0.0, {"x": 1}), KeyValue(key="k")]
    slow = [Pair("a", -0.0, {"x": 2}), KeyValue(key="j")]
    lines = differences(fast, slow)
    assert [line.split(":")[0] for line in lines] == ["[0].score", "[0].tags['x']", "[1].key"]
    assert differences([float("nan")], [float("nan")]) == []
    assert differences({"a": 1, "b": 2}, {"b": 2, "a": 1}) != []  # order kept
    assert differences((1,), [1]) != []  # types kept


def test_the_harness_counts_declines_and_compares_what_was_decided() -> None:
    parity: Parity[int, Pair] = Parity("doubling")
    parity.check(range(6), lambda n: LATER if n % 3 == 0 else Pair(str(n), n * 2.0, {}),
                 lambda n: Pair(str(n), n + n + 0.0, {}))  # fmt: skip
    assert (parity.decided, dict(parity.declined)) == (4, {"later": 2})
    parity.assert_holds(min_decided=4)


def test_a_difference_or_a_fast_path_that_decides_nothing_fails() -> None:
    wrong: Parity[int, Pair] = Parity("off by one")
    wrong.check([1, 2], lambda n: Pair("n", n + 1.0, {}), lambda n: Pair("n", float(n), {}))
    with pytest.raises(AssertionError, match=r"off by one: 2 fields differ .*\n.*score"):
        wrong.assert_holds()
    gone: Parity[int, Pair] = Parity("gone")
    gone.check([1, 2], lambda n: LATER, lambda n: Pair("n", float(n), {}))
    with pytest.raises(AssertionError, match=r"decided 0 items .*'later': 2"):
        gone.assert_holds()
