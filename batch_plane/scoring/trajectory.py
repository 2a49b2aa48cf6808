"""Deterministic trajectory scorers: pure functions, no I/O.

Compatible with agentevals (``match``, ``graph_match``), DeepEval (``tool_correctness``),
RAGAS (``tool_call_accuracy``, ``tool_call_f1``) and tau-bench (``pass_hat_k``,
``pass_at_k``); every deliberate difference is listed in docs/trajectory.md.
Tool calls are plain dicts ``{"name", "args", "output"}`` or OpenAI ``tool_calls`` entries.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from pathgrade.batch_plane.scoring.trajectory_calls import (
    ToolCall,
    normalize_tool_call,
    normalize_tool_calls,
)
from pathgrade.batch_plane.scoring.trajectory_match import graph_match, match

__all__ = [
    "ToolCall",
    "graph_match",
    "kendall_tau_b",
    "match",
    "pass_at_k",
    "pass_hat_k",
    "path_scores",
    "tool_call_accuracy",
    "tool_call_f1",
    "tool_correctness",
]


# --- DeepEval ToolCorrectnessMetric -------------------------------------------------------


def _shared_count(left: Iterable[Hashable], right: Iterable[Hashable]) -> int:
    """Size of the multiset intersection of ``left`` and ``right``."""
    remaining: dict[Hashable, int] = {}
    for item in left:
        remaining[item] = remaining.get(item, 0) + 1
    shared = 0
    for item in right:
        count = remaining.get(item)
        if count:
            remaining[item] = count - 1
            shared += 1
    return shared


def _name_and_type(call: ToolCall) -> tuple[str, str]:
    """What the default DeepEval score compares: tool name and type."""
    return call.name, call.type


def _args_overlap(expected: Mapping[str, Any], called: Mapping[str, Any]) -> float:
    """DeepEval's partial argument score: share of all keys whose values agree (recursing)."""
    if expected == called:
        return 1.0
    all_keys = set(expected) | set(called)
    score = 0.0
    for key in set(expected) & set(called):
        if expected[key] == called[key]:
            score += 1 / len(all_keys)
        elif isinstance(expected[key], Mapping) and isinstance(called[key], Mapping):
            score += _args_overlap(expected[key], called[key]) / len(all_keys)
    return score


def _pair_score(
    expected: ToolCall, called: ToolCall, compare_args: bool, compare_output: bool
) -> float:
    """Credit for using ``called`` where ``expected`` was due (0 when name or type differ)."""
    if expected.name != called.name or expected.type != called.type:
        return 0.0
    if compare_output and expected.output != called.output:
        return 0.0
    return _args_overlap(expected.args, called.args) if compare_args else 1.0


def _exact_sequence_score(
    called: list[ToolCall], expected: list[ToolCall], compare_args: bool, compare_output: bool
) -> float:
    """1.0 when both lists agree position by position, else 0.0."""
    if len(called) != len(expected):
        return 0.0
    for call, want in zip(called, expected, strict=True):
        if (call.name, call.type) != (want.name, want.type):
            return 0.0
        if compare_args and call.args != want.args:
            return 0.0
        if compare_output and call.output != want.output:
            return 0.0
    return 1.0


def _weighted_lcs(
    called: list[ToolCall], expected: list[ToolCall], compare_args: bool, compare_output: bool
) -> float:
    """Weight of the best common subsequence, each pair weighted by its pair score."""
    previous = [0.0] * (len(called) + 1)
    for want in expected:
        current = [0.0]
        for j, call in enumerate(called, start=1):
            weight = _pair_score(want, call, compare_args, compare_output)
            diagonal = previous[j - 1] + weight if weight > 0 else 0.0
            current.append(max(previous[j], current[j - 1], diagonal))
        previous = current
    return previous[-1]


def _greedy_best_match(
    called: list[ToolCall], expected: list[ToolCall], compare_args: bool, compare_output: bool
) -> float:
    """Sum over expected calls of the best score of a still unused call (each call used once)."""
    used: set[int] = set()
    total = 0.0
    for want in expected:
        best_score, best_index = 0.0, None
        for index, call in enumerate(called):
            if index in used:
                continue
            score = _pair_score(want, call, compare_args, compare_output)
            if score > best_score:
                best_score, best_index = score, index
        if best_index is not None:
            used.add(best_index)
            total += best_score
    return total


def tool_correctness(
    called: Sequence[Any],
    expected: Sequence[Any],
    ordering: bool = False,
    exact: bool = False,
    compare_args: bool = False,
    compare_output: bool = False,
) -> float:
    """DeepEval ToolCorrectnessMetric's deterministic score in [0, 1].

    Default: share of expected calls matched by a distinct called tool (name and type;
    partial credit for arguments with ``compare_args``). ``ordering``: weighted longest common
    subsequence over the expected length. ``exact``: 1.0 only when the lists agree position by
    position. Duplicate calls count as often as they occur (DeepEval counts identical
    duplicates once; see docs/trajectory.md).
    """
    called_calls = normalize_tool_calls(called, "called")
    expected_calls = normalize_tool_calls(expected, "expected")
    if exact:
        return _exact_sequence_score(called_calls, expected_calls, compare_args, compare_output)
    if not expected_calls:
        return 1.0 if not called_calls else 0.0
    if not (ordering or compare_args or compare_output):
        # Pair scores are 0 or 1 by (name, type), so the greedy match is the multiset overlap.
        called_keys = map(_name_and_type, called_calls)
        return _shared_count(called_keys, map(_name_and_type, expected_calls)) / len(expected_calls)
    scorer = _weighted_lcs if ordering else _greedy_best_match
    return scorer(called_calls, expected_calls, compare_args, compare_output) / len(expected_calls)


# --- RAGAS ToolCallAccuracy and ToolCallF1 --------------------------------------------------


def _ragas_sort_key(call: ToolCall) -> tuple[str, ...]:
    """RAGAS's order-free sort key: name, then each argument name and str(value) by name."""
    return (call.name, *(part for key in sorted(call.args) for part in (key, str(call.args[key]))))


def _ragas_args_score(predicted: Mapping[str, Any], reference: Mapping[str, Any]) -> float:
    """Share of reference arguments whose str() value the prediction repeats."""
    if not reference:
        return 1.0 if not predicted else 0.0
    hits = sum(key in predicted and str(predicted[key]) == str(reference[key]) for key in reference)
    return hits / len(reference)


def tool_call_accuracy(
    predicted: Sequence[Any], reference: Sequence[Any], strict_order: bool = True
) -> float:
    """RAGAS ToolCallAccuracy: 0 unless the tool-name sequences align, else mean arg accuracy.

    With ``strict_order=False`` both lists are sorted by RAGAS's key before pairing, so the
    names only need to agree as multisets.
    """
    predicted_calls = normalize_tool_calls(predicted, "predicted")
    reference_calls = normalize_tool_calls(reference, "reference")
    if not predicted_calls or not reference_calls:
        return 1.0 if not predicted_calls and not reference_calls else 0.0
    if not strict_order:
        predicted_calls = sorted(predicted_calls, key=_ragas_sort_key)
        reference_calls = sorted(reference_calls, key=_ragas_sort_key)
    if [c.name for c in predicted_calls] != [c.name for c in reference_calls]:
        return 0.0
    scores = [
        _ragas_args_score(pred.args, ref.args)
        for pred, ref in zip(predicted_calls, reference_calls, strict=True)
    ]
    return math.fsum(scores) / len(reference_calls)


# JSON type tags of atomic values: equal values of different JSON types never compare equal
# (`1` vs `true`, `{}` vs `[]`, an object vs a list of pairs); int and float are one type.
_ATOMIC_TAGS: dict[type, str] = {str: "s", int: "n", float: "n", bool: "b", type(None): "z"}


def frozen_json(value: Any) -> Hashable:
    """A hashable stand-in for a JSON-like value, tagged with its JSON type: two values
    freeze alike only when they are the same JSON value (object key order ignored)."""
    tag = _ATOMIC_TAGS.get(type(value))
    if tag is not None:
        return (tag, value)
    if type(value) is dict or isinstance(value, Mapping):
        return ("o", tuple(sorted((str(k), frozen_json(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("a", tuple(frozen_json(item) for item in value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    return ("s", value) if isinstance(value, str) else ("x", value)


def _call_key(call: ToolCall) -> Hashable:
    """Identity of a call for counting: its name and arguments."""
    return (call.name, frozen_json(call.args))


def tool_call_f1(predicted: Sequence[Any], reference: Sequence[Any]) -> float:
    """RAGAS ToolCallF1: F1 of predicted vs reference calls (name and arguments equal).

    Calls are counted as a multiset (a duplicate call is a false positive) and the score is
    not rounded; both lists empty scores 1.0. See docs/trajectory.md.
    """
    predicted_keys = list(map(_call_key, normalize_tool_calls(predicted, "predicted")))
    reference_keys = list(map(_call_key, normalize_tool_calls(reference, "reference")))
    if not predicted_keys and not reference_keys:
        return 1.0
    true_positives = _shared_count(predicted_keys, reference_keys)
    if true_positives == 0:
        return 0.0
    precision = true_positives / len(predicted_keys)
    recall = true_positives / len(reference_keys)
    return 2 * precision * recall / (precision + recall)


# --- Path scores ----------------------------------------------------------------------------


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b rank correlation of paired samples; NaN when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"y: length {len(y)} differs from x length {len(x)}")
    concordant_minus_discordant = 0
    pairs_untied_x = pairs_untied_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            concordant_minus_discordant += dx * dy
            pairs_untied_x += dx != 0
            pairs_untied_y += dy != 0
    if pairs_untied_x == 0 or pairs_untied_y == 0:
        return math.nan
    return concordant_minus_discordant / math.sqrt(pairs_untied_x * pairs_untied_y)


def _tool_names(steps: Sequence[Any], where: str) -> list[str]:
    """Tool names of a path given as names or tool calls."""
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence):
        raise TypeError(f"{where}: expected a list of tool names or calls")
    return [
        step if isinstance(step, str) else normalize_tool_call(step, f"{where}[{i}]").name
        for i, step in enumerate(steps)
    ]


def _occurrence_positions(names: list[str]) -> dict[tuple[str, int], int]:
    """Position of the k-th occurrence of each tool, keyed by (name, k)."""
    seen: Counter[str] = Counter()
    positions = {}
    for position, name in enumerate(names):
        positions[(name, seen[name])] = position
        seen[name] += 1
    return positions


def _order_score(expected: list[str], actual: list[str]) -> float:
    """(tau-b + 1) / 2 over the positions of shared tool occurrences; 1.0 below two shared."""
    expected_positions = _occurrence_positions(expected)
    actual_positions = _occurrence_positions(actual)
    shared = [key for key in expected_positions if key in actual_positions]
    if len(shared) < 2:
        return 1.0
    tau = kendall_tau_b(
        [expected_positions[key] for key in shared], [actual_positions[key] for key in shared]
    )
    return (tau + 1) / 2


def path_scores(
    expected: Sequence[Any], actual: Sequence[Any], optimal_steps: int | None = None
) -> dict[str, float]:
    """Coverage, precision, order and efficiency of an agent's tool path, each in [0, 1].

    ``coverage``: share of expected calls that occur (multiset); ``precision``: share of
    actual calls that were expected (multiset); ``order``: Kendall tau-b of shared tools'
    positions scaled to (tau + 1) / 2; ``efficiency``: ``optimal_steps`` (default: number of
    expected calls) over actual calls, capped at 1. Steps are tool names or tool calls.
    """
    expected_names = _tool_names(expected, "expected")
    actual_names = _tool_names(actual, "actual")
    if optimal_steps is None:
        optimal_steps = len(expected_names)
    if isinstance(optimal_steps, bool) or not isinstance(optimal_steps, int) or optimal_steps < 0:
        raise ValueError(f"optimal_steps: must be a non-negative integer, got {optimal_steps!r}")
    shared = _shared_count(expected_names, actual_names)
    return {
        "coverage": shared / len(expected_names) if expected_names else 1.0,
        "precision": shared / len(actual_names) if actual_names else 1.0,
        "order": _order_score(expected_names, actual_names),
        "efficiency": min(1.0, optimal_steps / len(actual_names)) if actual_names else 1.0,
    }


# --- tau-bench pass^k and pass@k ------------------------------------------------------------


def _check_count(value: Any, where: str) -> int:
    """A non-negative integer count, or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where}: must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{where}: must be >= 0, got {value}")
    return value


def _task_counts(
    successes: Sequence[int], trials: int | Sequence[int], k: int
) -> list[tuple[int, int]]:
    """Validated (successes, trials) per task for a pass-k estimate."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: must be an integer >= 1, got {k!r}")
    if isinstance(successes, str | bytes) or not isinstance(successes, Sequence) or not successes:
        raise ValueError("successes: must be a non-empty list of success counts per task")
    if isinstance(trials, Sequence):
        if len(trials) != len(successes):
            raise ValueError(
                f"trials: length {len(trials)} differs from successes length {len(successes)}"
            )
        trial_counts = [_check_count(n, f"trials[{i}]") for i, n in enumerate(trials)]
    else:
        trial_counts = [_check_count(trials, "trials")] * len(successes)
    counts = []
    for index, (c, n) in enumerate(zip(successes, trial_counts, strict=True)):
        c = _check_count(c, f"successes[{index}]")
        if c > n:
            raise ValueError(f"successes[{index}]: {c} exceeds its {n} trials")
        if k > n:
            raise ValueError(f"k: {k} exceeds the {n} trials of task {index} (trials)")
        counts.append((c, n))
    return counts


def pass_hat_k(successes: Sequence[int], trials: int | Sequence[int], k: int) -> float:
    """tau-bench pass^k: mean over tasks of C(c, k) / C(n, k) (all k sampled trials succeed)."""
    counts = _task_counts(successes, trials, k)
    return math.fsum(math.comb(c, k) / math.comb(n, k) for c, n in counts) / len(counts)


def pass_at_k(successes: Sequence[int], trials: int | Sequence[int], k: int) -> float:
    """pass@k: mean over tasks of 1 - C(n - c, k) / C(n, k) (some sampled trial succeeds)."""
    counts = _task_counts(successes, trials, k)
    return math.fsum(1 - math.comb(n - c, k) / math.comb(n, k) for c, n in counts) / len(counts)
