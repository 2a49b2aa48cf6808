"""Hypothesis properties of the trajectory scorers."""

from __future__ import annotations

import math
from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.batch_plane.scoring.trajectory import (
    kendall_tau_b,
    match,
    pass_at_k,
    pass_hat_k,
    path_scores,
    tool_call_f1,
    tool_correctness,
)

FAST = settings(max_examples=60, deadline=None)

tool_calls = st.builds(
    lambda name, args: {"name": name, "args": args},
    st.sampled_from(["a", "b", "c"]),
    st.dictionaries(st.sampled_from(["x", "y"]), st.integers(0, 2), max_size=2),
)
call_groups = st.lists(st.lists(tool_calls, max_size=3), max_size=4)
args_modes = st.sampled_from(["exact", "ignore", "subset", "superset"])


def as_messages(groups: list[list[dict]]) -> list[dict]:
    """One assistant message per group of tool calls, after a user message."""
    return [{"role": "user"}] + [{"role": "assistant", "tool_calls": g} for g in groups]


@FAST
@given(call_groups, call_groups, args_modes)
def test_strict_implies_unordered_implies_subset_and_superset(outputs, reference, args_mode):
    out, ref = as_messages(outputs), as_messages(reference)
    if match(out, ref, mode="strict", args_mode=args_mode):
        assert match(out, ref, mode="unordered", args_mode=args_mode)
    unordered = match(out, ref, mode="unordered", args_mode=args_mode)
    both = match(out, ref, mode="subset", args_mode=args_mode) and match(
        out, ref, mode="superset", args_mode=args_mode
    )
    assert unordered == both


@FAST
@given(call_groups, args_modes, st.randoms(use_true_random=False))
def test_unordered_is_invariant_under_permutation(groups, args_mode, rng):
    calls = [call for group in groups for call in group]
    shuffled = calls[:]
    rng.shuffle(shuffled)
    reference = as_messages(groups)
    assert match(as_messages([calls]), reference, mode="unordered", args_mode=args_mode) == match(
        as_messages([shuffled]), reference, mode="unordered", args_mode=args_mode
    )
    assert match(as_messages([shuffled]), as_messages([calls]), mode="unordered")


def superset_args(output: dict, reference: dict) -> bool:
    """Brute-force oracle's pair test for args_mode="superset"."""
    return (
        output["name"] == reference["name"] and reference["args"].items() <= output["args"].items()
    )


@FAST
@given(st.lists(tool_calls, max_size=5), st.lists(tool_calls, max_size=5))
def test_unordered_agrees_with_brute_force_over_all_pairings(outputs, reference):
    exists = len(outputs) == len(reference) and any(
        all(superset_args(o, r) for o, r in zip(ordering, reference, strict=True))
        for ordering in permutations(outputs)
    )
    assert (
        match(as_messages([outputs]), as_messages([reference]), "unordered", "superset") == exists
    )


@FAST
@given(call_groups)
def test_a_trajectory_matches_itself_in_every_mode(groups):
    messages = as_messages(groups)
    for mode in ("strict", "unordered", "subset", "superset"):
        assert match(messages, messages, mode=mode)


@FAST
@given(st.lists(tool_calls, max_size=6), st.lists(tool_calls, max_size=6))
def test_scores_stay_in_unit_interval(called, expected):
    for options in ({}, {"ordering": True}, {"exact": True}, {"compare_args": True}):
        assert 0.0 <= tool_correctness(called, expected, **options) <= 1.0
    assert 0.0 <= tool_call_f1(called, expected) <= 1.0
    assert tool_call_f1(called, expected) == tool_call_f1(expected, called)


names = st.lists(st.sampled_from("abcdef"), max_size=8)


@FAST
@given(names, names)
def test_path_order_is_symmetric_and_bounded(expected, actual):
    forward, backward = path_scores(expected, actual), path_scores(actual, expected)
    assert forward["order"] == backward["order"]
    assert all(0.0 <= value <= 1.0 for value in forward.values())


@FAST
@given(st.lists(st.sampled_from("abcdefgh"), min_size=2, max_size=8, unique=True))
def test_path_order_extremes(path):
    assert path_scores(path, path)["order"] == 1.0
    assert path_scores(path, path[::-1])["order"] == 0.0


@FAST
@given(st.lists(st.integers(0, 9), min_size=2, max_size=10), st.data())
def test_kendall_tau_b_is_bounded_and_symmetric(x, data):
    y = data.draw(st.lists(st.integers(0, 9), min_size=len(x), max_size=len(x)))
    tau = kendall_tau_b(x, y)
    if not math.isnan(tau):
        assert -1.0 - 1e-12 <= tau <= 1.0 + 1e-12
        assert tau == kendall_tau_b(y, x)
        assert kendall_tau_b(x, [-v for v in y]) == -tau


@FAST
@given(st.data())
def test_pass_hat_k_never_exceeds_pass_at_k(data):
    trials = data.draw(st.integers(1, 12))
    successes = data.draw(st.lists(st.integers(0, trials), min_size=1, max_size=6))
    k = data.draw(st.integers(1, trials))
    hat, at = pass_hat_k(successes, trials, k), pass_at_k(successes, trials, k)
    assert 0.0 <= hat <= at + 1e-12 <= 1.0 + 1e-12
    if k == 1:
        assert math.isclose(hat, at)
