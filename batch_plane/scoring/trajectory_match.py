"""Trajectory match (agentevals-compatible) with one-to-one tool-call matching.

``match`` reproduces agentevals' ``create_trajectory_match_evaluator``; where agentevals pairs
tool calls greedily (first fit), this module finds a maximum bipartite matching, so a
trajectory matches whenever some one-to-one pairing exists. See docs/trajectory.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pathgrade.batch_plane.scoring.trajectory_calls import Message, ToolCall, normalize_messages

MatchMode = Literal["strict", "unordered", "subset", "superset"]
ArgsMode = Literal["exact", "ignore", "subset", "superset"]
ArgsMatcher = Callable[[dict[str, Any], dict[str, Any]], bool]
ArgsOverride = ArgsMode | list[str] | ArgsMatcher

MATCH_MODES: tuple[str, ...] = ("strict", "unordered", "subset", "superset")
ARGS_MODES: tuple[str, ...] = ("exact", "ignore", "subset", "superset")


def _args_exact(output_args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
    """Arguments are equal."""
    return output_args == reference_args


def _args_ignore(output_args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
    """Arguments are not compared."""
    return True


def _args_subset(output_args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
    """Every output key-value pair appears in the reference arguments."""
    return all(key in reference_args and reference_args[key] == v for key, v in output_args.items())


def _args_superset(output_args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
    """Every reference key-value pair appears in the output arguments."""
    return _args_subset(reference_args, output_args)


_ARGS_MATCHERS: dict[str, ArgsMatcher] = {
    "exact": _args_exact,
    "ignore": _args_ignore,
    "subset": _args_subset,
    "superset": _args_superset,
}


def _nested_value(args: dict[str, Any], dotted_key: str) -> Any:
    """Value at a dotted path such as ``time.start``; None when any part is missing."""
    current: Any = args
    for part in dotted_key.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _keys_matcher(keys: list[str]) -> ArgsMatcher:
    """Matcher that compares only the listed (dotted) keys."""

    def matches(output_args: dict[str, Any], reference_args: dict[str, Any]) -> bool:
        return all(_nested_value(output_args, k) == _nested_value(reference_args, k) for k in keys)

    return matches


def _override_matcher(tool_name: str, override: Any) -> ArgsMatcher:
    """Turn one ``overrides`` entry into a matcher, rejecting unknown forms."""
    where = f"overrides[{tool_name!r}]"
    if isinstance(override, str):
        if override not in _ARGS_MATCHERS:
            raise ValueError(f"{where}: unknown args mode {override!r}; use one of {ARGS_MODES}")
        return _ARGS_MATCHERS[override]
    if isinstance(override, list):
        if not override or not all(isinstance(key, str) and key for key in override):
            raise ValueError(f"{where}: a key list must be a non-empty list of key paths")
        return _keys_matcher(override)
    if callable(override):
        return override
    raise ValueError(f"{where}: expected an args mode, a key list or a callable")


class _CallMatcher:
    """Decides whether an output tool call may stand for a reference tool call."""

    def __init__(self, args_mode: str, overrides: Mapping[str, ArgsOverride] | None) -> None:
        if args_mode not in _ARGS_MATCHERS:
            raise ValueError(f"args_mode: unknown mode {args_mode!r}; use one of {ARGS_MODES}")
        if overrides is not None and not isinstance(overrides, Mapping):
            raise TypeError(f"overrides: expected a dict, got {type(overrides).__name__}")
        self._default = _ARGS_MATCHERS[args_mode]
        self._by_tool = {name: _override_matcher(name, o) for name, o in (overrides or {}).items()}

    def __call__(self, output_call: ToolCall, reference_call: ToolCall) -> bool:
        """Same name and arguments accepted by the tool's matcher (output args first)."""
        if output_call.name != reference_call.name:
            return False
        matcher = self._by_tool.get(output_call.name, self._default)
        return bool(matcher(output_call.args, reference_call.args))


def _maximum_matching(
    left: Sequence[ToolCall], right: Sequence[ToolCall], compatible: Callable[[int, int], bool]
) -> int:
    """Size of a maximum one-to-one matching (Kuhn's augmenting paths)."""
    edges = [[j for j in range(len(right)) if compatible(i, j)] for i in range(len(left))]
    owner: list[int | None] = [None] * len(right)

    def augment(i: int, visited: set[int]) -> bool:
        for j in edges[i]:
            if j in visited:
                continue
            visited.add(j)
            current = owner[j]
            if current is None or augment(current, visited):
                owner[j] = i
                return True
        return False

    return sum(augment(i, set()) for i in range(len(left)))


def _covers_reference(
    outputs: Sequence[ToolCall], references: Sequence[ToolCall], matcher: _CallMatcher
) -> bool:
    """Every reference call has its own matching output call."""
    size = _maximum_matching(references, outputs, lambda r, o: matcher(outputs[o], references[r]))
    return size == len(references)


def _covers_outputs(
    outputs: Sequence[ToolCall], references: Sequence[ToolCall], matcher: _CallMatcher
) -> bool:
    """Every output call has its own matching reference call."""
    size = _maximum_matching(outputs, references, lambda o, r: matcher(outputs[o], references[r]))
    return size == len(outputs)


def _same_calls(
    outputs: Sequence[ToolCall], references: Sequence[ToolCall], matcher: _CallMatcher
) -> bool:
    """The two call lists pair up one-to-one (a perfect matching exists)."""
    return len(outputs) == len(references) and _covers_reference(outputs, references, matcher)


def _strict(outputs: list[Message], references: list[Message], matcher: _CallMatcher) -> bool:
    """Same message count and roles; each message pair has one-to-one matching tool calls."""
    if len(outputs) != len(references):
        return False
    return all(
        out.role == ref.role and _same_calls(out.tool_calls, ref.tool_calls, matcher)
        for out, ref in zip(outputs, references, strict=True)
    )


def _all_calls(messages: list[Message]) -> list[ToolCall]:
    """Tool calls of every message, in order."""
    return [call for message in messages for call in message.tool_calls]


def match(
    outputs: Any,
    reference: Any,
    mode: MatchMode = "strict",
    args_mode: ArgsMode = "exact",
    overrides: Mapping[str, ArgsOverride] | None = None,
) -> bool:
    """Whether the agent's message trajectory matches the reference trajectory.

    ``mode``: ``strict`` (same messages, roles and per-message tool calls in order of
    messages), ``unordered`` (same tool calls in any order), ``subset`` (every output call is
    in the reference), ``superset`` (every reference call is in the output). ``args_mode``
    compares arguments: ``exact``, ``ignore``, ``subset`` (output args within the reference
    args), ``superset`` (output args contain the reference args). ``overrides`` maps a tool
    name to an args mode, a list of dotted keys to compare, or a callable
    ``(output_args, reference_args) -> bool``.
    """
    if mode not in MATCH_MODES:
        raise ValueError(f"mode: unknown mode {mode!r}; use one of {MATCH_MODES}")
    matcher = _CallMatcher(args_mode, overrides)
    output_messages = normalize_messages(outputs, "outputs")
    reference_messages = normalize_messages(reference, "reference")
    if mode == "strict":
        return _strict(output_messages, reference_messages, matcher)
    output_calls, reference_calls = _all_calls(output_messages), _all_calls(reference_messages)
    if mode == "unordered":
        return _same_calls(output_calls, reference_calls, matcher)
    if mode == "subset":
        return _covers_outputs(output_calls, reference_calls, matcher)
    return _covers_reference(output_calls, reference_calls, matcher)


def _normalize_steps(steps: Any, where: str) -> list[tuple[str, ...]]:
    """Validate a graph trajectory's steps: a list of lists of node names."""
    if isinstance(steps, str | bytes) or not isinstance(steps, Sequence):
        raise TypeError(f"{where}: expected a list of steps, got {type(steps).__name__}")
    normalized = []
    for index, step in enumerate(steps):
        if isinstance(step, str | bytes) or not isinstance(step, Sequence):
            raise TypeError(f"{where}[{index}]: expected a list of node names")
        if not all(isinstance(node, str) for node in step):
            raise TypeError(f"{where}[{index}]: every node name must be a string")
        normalized.append(tuple(step))
    return normalized


def graph_match(steps: Any, reference_steps: Any) -> bool:
    """Graph trajectory strict match: the same node names in the same order at every step."""
    return _normalize_steps(steps, "steps") == _normalize_steps(reference_steps, "reference_steps")
