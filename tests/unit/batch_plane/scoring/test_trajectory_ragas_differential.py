"""Differential test: `tool_call_f1` and `tool_call_accuracy` against the installed RAGAS
(test-only dependency; `ragas.metrics.collections.ToolCallF1` / `ToolCallAccuracy`,
rule-based: no model, no network) on generated calls with nested JSON arguments.

The documented differences (docs/trajectory.md) shape the comparison: RAGAS counts calls
as a set (pathgrade: a multiset), scores two empty lists 0.0 (pathgrade: 1.0), rounds to
4 decimals, and compares argument values with Python's equality, so `1 == true`
(pathgrade: values of different JSON types are never equal). The generated calls have no
repeated call, never both lists empty and no boolean, so that the two must agree exactly
after rounding; each difference is then shown on its own against the real RAGAS.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.batch_plane.scoring.trajectory import tool_call_accuracy, tool_call_f1
from ragas.messages import AIMessage, HumanMessage, ToolCall
from ragas.metrics.collections import ToolCallAccuracy, ToolCallF1

Call = tuple[str, dict[str, Any]]


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for every RAGAS score of the module."""
    running = asyncio.new_event_loop()
    yield running
    running.close()


def ragas_score(
    loop: asyncio.AbstractEventLoop, metric: Any, predicted: list[Call], reference: list[Call]
) -> float:
    """A RAGAS collections metric of (predicted, reference) name/args lists."""
    sample = [
        HumanMessage(content="help"),
        AIMessage(content="", tool_calls=[ToolCall(name=n, args=a) for n, a in predicted]),
    ]
    references = [ToolCall(name=n, args=a) for n, a in reference]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RAGAS warns on empty lists and length mismatch
        return float(loop.run_until_complete(metric.ascore(sample, references)).value)


@pytest.fixture(scope="module")
def ragas_f1(loop: asyncio.AbstractEventLoop) -> Any:
    metric = ToolCallF1()
    return lambda predicted, reference: ragas_score(loop, metric, predicted, reference)


def calls(items: list[Call]) -> list[dict[str, Any]]:
    return [{"name": name, "args": args} for name, args in items]


def ours(predicted: list[Call], reference: list[Call]) -> float:
    return tool_call_f1(calls(predicted), calls(reference))


# JSON values without booleans: for these, Python's equality is JSON's (1 == 1.0 in both).
atoms = st.one_of(st.none(), st.integers(-2, 2), st.sampled_from([0.5, 1.0, 2.0]),
                  st.sampled_from(["", "a", "1"]))  # fmt: skip
values = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2),
        st.dictionaries(st.sampled_from(["k", "v"]), inner, max_size=2),
    ),
    max_leaves=4,
)
call = st.tuples(
    st.sampled_from(["search", "refund"]),
    st.dictionaries(st.sampled_from(["q", "x"]), values, max_size=2),
)


def distinct(calls: list[Call]) -> list[Call]:
    """`calls` without repeats (by RAGAS's own notion of equal calls: its set)."""
    kept: list[Call] = []
    for item in calls:
        if item not in kept:
            kept.append(item)
    return kept


@settings(max_examples=300, deadline=None)
@given(predicted=st.lists(call, max_size=4), reference=st.lists(call, max_size=4))
def test_tool_call_f1_agrees_with_ragas(
    ragas_f1: Any, predicted: list[Call], reference: list[Call]
) -> None:
    predicted, reference = distinct(predicted), distinct(reference)
    if not predicted and not reference:
        return  # difference 2, shown below
    assert round(ours(predicted, reference), 4) == ragas_f1(predicted, reference)


def test_the_issues_example_an_object_is_not_a_list(ragas_f1: Any) -> None:
    object_, array = [("d", {"x": {}})], [("d", {"x": []})]
    assert ours(object_, array) == ragas_f1(object_, array) == 0.0
    pairs = [("d", {"x": [["k", 1]]})]
    assert ours([("d", {"x": {"k": 1}})], pairs) == ragas_f1([("d", {"x": {"k": 1}})], pairs) == 0.0


def test_documented_differences_hold_against_the_installed_ragas(ragas_f1: Any) -> None:
    # 1. a multiset here, a set in RAGAS
    twice, once = [("w", {}), ("w", {})], [("w", {})]
    assert ours(twice, once) == pytest.approx(2 / 3) and ragas_f1(twice, once) == 1.0
    # 2. nothing expected, nothing called
    assert (ours([], []), ragas_f1([], [])) == (1.0, 0.0)
    # 3. not rounded here
    three = [("a", {}), ("b", {}), ("c", {})]
    assert ours(three[:1], three) == 0.5 and ragas_f1(three[:1], three) == 0.5
    assert ours(three[:2], [*three, ("d", {})]) == pytest.approx(2 / 3)
    assert ragas_f1(three[:2], [*three, ("d", {})]) == 0.6667
    # 4. a number is not a boolean here; Python's 1 == True in RAGAS
    number, boolean = [("d", {"x": 1})], [("d", {"x": True})]
    assert ours(number, boolean) == 0.0 and ragas_f1(number, boolean) == 1.0


flat_call = st.tuples(
    st.sampled_from(["search", "refund", "lookup"]),
    st.dictionaries(st.sampled_from(["q", "x", "n"]), st.one_of(atoms, st.booleans()), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    predicted=st.lists(flat_call, max_size=4),
    reference=st.lists(flat_call, max_size=4),
    strict_order=st.booleans(),
)
def test_tool_call_accuracy_agrees_with_ragas(
    loop: asyncio.AbstractEventLoop,
    predicted: list[Call],
    reference: list[Call],
    strict_order: bool,
) -> None:
    theirs = ragas_score(loop, ToolCallAccuracy(strict_order=strict_order), predicted, reference)
    mine = tool_call_accuracy(calls(predicted), calls(reference), strict_order=strict_order)
    assert mine == pytest.approx(theirs)  # str() comparison of values in both (1 == "1")
