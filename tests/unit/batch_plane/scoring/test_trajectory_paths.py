"""path_scores, Kendall tau-b, and tau-bench pass^k / pass@k."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest
from pathgrade.batch_plane.scoring.trajectory import (
    kendall_tau_b,
    pass_at_k,
    pass_hat_k,
    path_scores,
)


def adjacent_pairs_in_order(expected: list[str], actual: list[str]) -> float:
    """The common shortcut: share of adjacent expected pairs that keep their order."""
    position = {name: actual.index(name) for name in expected}
    pairs = list(pairwise(expected))
    return sum(position[a] < position[b] for a, b in pairs) / len(pairs)


def test_kendall_order_differs_from_adjacent_pairs_shortcut():
    expected, actual = ["A", "B", "C", "D"], ["B", "C", "D", "A"]
    # A moved from first to last: 3 of 6 pairs discordant, tau = 0, order = 0.5; the
    # adjacent-pairs shortcut only sees (A, B) broken and reports 2/3.
    assert path_scores(expected, actual)["order"] == 0.5
    assert adjacent_pairs_in_order(expected, actual) == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("expected", "actual", "scores"),
    [
        (["a", "b", "c"], ["a", "b", "c"], (1.0, 1.0, 1.0, 1.0)),
        (["a", "b", "c"], ["c", "b", "a"], (1.0, 1.0, 0.0, 1.0)),
        # one redundant search: all expected covered, 3 of 4 calls expected, order kept
        (["search", "book"], ["search", "search", "book"], (1.0, 2 / 3, 1.0, 2 / 3)),
        (["search", "search", "book"], ["search", "book"], (2 / 3, 1.0, 1.0, 1.0)),
        (["a", "b"], ["x", "y", "z", "w"], (0.0, 0.0, 1.0, 0.5)),
        ([], [], (1.0, 1.0, 1.0, 1.0)),
        (["a"], [], (0.0, 1.0, 1.0, 1.0)),
    ],
)
def test_path_scores(expected, actual, scores):
    result = path_scores(expected, actual)
    assert list(result) == ["coverage", "precision", "order", "efficiency"]
    assert tuple(result.values()) == pytest.approx(scores)


def test_order_pairs_kth_occurrences():
    # k-th "a" pairs with k-th "a": expected positions (0 a, 1 b, 2 a), actual (0 a, 1 a, 2 b)
    # -> pairs (0,0) a#0, (1,2) b#0, (2,1) a#1: one discordant pair of three, tau = 1/3.
    assert path_scores(["a", "b", "a"], ["a", "a", "b"])["order"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(("expected", "actual"), [("ab", ["a"]), (["a"], "ab"), (["a"], 3)])
def test_path_scores_refuse_a_path_that_is_no_list(expected, actual):
    with pytest.raises(TypeError, match="expected a list of tool names or calls"):
        path_scores(expected, actual)


def test_efficiency_uses_optimal_steps_and_caps_at_one():
    assert path_scores(["a", "b"], ["a", "x", "b", "y"], optimal_steps=3)["efficiency"] == 0.75
    assert path_scores(["a", "b"], ["a"], optimal_steps=5)["efficiency"] == 1.0


def test_path_scores_accept_tool_calls():
    openai_call = {"type": "function", "function": {"name": "b", "arguments": "{}"}}
    assert path_scores(["a", "b"], [{"name": "a", "args": {}}, openai_call])["order"] == 1.0


@pytest.mark.parametrize("optimal_steps", [-1, 1.5, True])
def test_bad_optimal_steps_is_named(optimal_steps):
    with pytest.raises(ValueError, match="optimal_steps: must be a non-negative integer"):
        path_scores(["a"], ["a"], optimal_steps=optimal_steps)


def test_bad_path_step_is_named():
    with pytest.raises(TypeError, match=r"actual\[1\]: expected a tool-call dict, got int"):
        path_scores(["a"], ["a", 3])


def test_kendall_tau_b_with_ties_matches_textbook_value():
    # x = [1, 2, 2, 3], y = [1, 3, 2, 2]: concordant 3, discordant 1, ties 1 in x and 1 in y
    # -> tau_b = (3 - 1) / sqrt(5 * 5) = 0.4
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 2]) == pytest.approx(0.4)
    assert math.isnan(kendall_tau_b([1, 1], [1, 2]))


@pytest.mark.parametrize(("x", "y"), [([1, 2], [1, 2, 3]), ([1, 2, 3], [1, 2])])
def test_kendall_tau_b_refuses_samples_of_different_lengths(x, y):
    with pytest.raises(ValueError, match=f"y: length {len(y)} differs from x length {len(x)}"):
        kendall_tau_b(x, y)
    with pytest.raises(ValueError, match="y: length 1 differs from x length 2"):
        kendall_tau_b([1, 2], [1])


def test_kendall_tau_b_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats", reason="scipy not installed: differential test")
    rng = random.Random(7)
    for _ in range(200):
        size = rng.randint(2, 12)
        x = [rng.randint(0, 4) for _ in range(size)]
        y = [rng.randint(0, 4) for _ in range(size)]
        expected = stats.kendalltau(x, y, variant="b").statistic
        if math.isnan(expected):
            assert math.isnan(kendall_tau_b(x, y))
        else:
            assert kendall_tau_b(x, y) == pytest.approx(expected, abs=1e-12)


# tau-bench pass^k: sierra-research/tau-bench tau_bench/run.py display_metrics computes
# mean over tasks of comb(c, k) / comb(num_trials, k); pass@k is Chen et al. (2021).
# Worked by hand: tasks with c = 2 and c = 4 successes of n = 4 trials.
@pytest.mark.parametrize(
    ("k", "hat", "at"),
    [
        (1, 0.75, 0.75),  # both equal the mean success rate (2/4 + 4/4) / 2
        (2, (1 / 6 + 1) / 2, (5 / 6 + 1) / 2),  # C(2,2)/C(4,2) = 1/6; 1 - C(2,2)/C(4,2) = 5/6
        (3, (0 + 1) / 2, (1 + 1) / 2),  # no 3-draw is all successes (or all failures) of c=2
        (4, 0.5, 1.0),
    ],
)
def test_pass_k_worked_values(k, hat, at):
    assert pass_hat_k([2, 4], 4, k) == pytest.approx(hat)
    assert pass_at_k([2, 4], 4, k) == pytest.approx(at)


def test_pass_k_accepts_trials_per_task():
    assert pass_hat_k([1, 3], [2, 3], 2) == pytest.approx((0 + 1) / 2)
    assert pass_at_k([1, 3], [2, 3], 2) == pytest.approx((1 + 1) / 2)


@pytest.mark.parametrize(
    ("successes", "trials", "k", "message"),
    [
        ([1, 2], 3, 4, r"k: 4 exceeds the 3 trials of task 0 \(trials\)"),
        ([1, 2], [3, 2], 3, r"k: 3 exceeds the 2 trials of task 1 \(trials\)"),
        ([1, -1], 3, 1, r"successes\[1\]: must be >= 0, got -1"),
        ([1, 4], 3, 1, r"successes\[1\]: 4 exceeds its 3 trials"),
        ([1, 2], [3, 3, 3], 1, "trials: length 3 differs from successes length 2"),
        ([1, 2], [3], 1, "trials: length 1 differs from successes length 2"),
        ([1], 3, True, "k: must be an integer >= 1, got True"),
        ([1], -3, 1, "trials: must be >= 0, got -3"),
        ([1], [2.5], 1, r"trials\[0\]: must be an integer"),
        ([], 3, 1, "successes: must be a non-empty list"),
        ("12", 3, 1, "successes: must be a non-empty list"),
        ([1], 3, 0, "k: must be an integer >= 1"),
    ],
)
def test_pass_k_errors_name_the_argument(successes, trials, k, message):
    for function in (pass_hat_k, pass_at_k):
        with pytest.raises(ValueError, match=message):
            function(successes, trials, k)
