"""Differential test: `batch_plane.scoring.trajectory.match` against the installed agentevals
(test-only dependency) on generated trajectories.

Two deliberate differences (docs/trajectory.md) shape the comparison:
- agentevals matches unordered/subset/superset calls greedily (first fit); pathgrade finds
  a one-to-one matching when one exists. The two must agree wherever greedy and
  one-to-one cannot differ (strict mode, or no tool name repeating within a trajectory);
  elsewhere pathgrade may only say "match" where agentevals says "no match".
- pathgrade always compares arguments as (output, reference); agentevals swaps the two in
  trajectory mode "subset" (so its args "subset" is pathgrade's "superset" there) and in
  one of the two passes of "unordered" (so subset/superset arguments are not compared
  there: the results legitimately differ).
"""

from __future__ import annotations

import json
from typing import Any

from agentevals.trajectory import match as agentevals_match
from hypothesis import given, settings
from hypothesis import strategies as st
from pathgrade.batch_plane.scoring.trajectory import match

MODES = ("strict", "unordered", "subset", "superset")
ARGS_MODES = ("exact", "ignore", "subset", "superset")
SWAPPED = {"subset": "superset", "superset": "subset"}

calls = st.lists(
    st.tuples(
        st.sampled_from(["lookup", "refund", "ticket", "search"]),
        st.dictionaries(st.sampled_from(["id", "q", "n"]), st.integers(0, 2), max_size=2),
    ),
    max_size=4,
)


def messages(trajectory: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """An OpenAI-style conversation making `trajectory`'s calls, one assistant turn each."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "help"}]
    for name, args in trajectory:
        call = {"function": {"name": name, "arguments": json.dumps(args)}}
        out.append({"role": "assistant", "content": "", "tool_calls": [call]})
    out.append({"role": "assistant", "content": "done"})
    return out


def unique_names(trajectory: list[tuple[str, dict[str, Any]]]) -> bool:
    names = [name for name, _ in trajectory]
    return len(names) == len(set(names))


@settings(max_examples=400, deadline=None)
@given(outputs=calls, reference=calls, mode=st.sampled_from(MODES),
       args_mode=st.sampled_from(ARGS_MODES))  # fmt: skip
def test_match_agrees_with_agentevals(
    outputs: list[tuple[str, dict[str, Any]]],
    reference: list[tuple[str, dict[str, Any]]],
    mode: str,
    args_mode: str,
) -> None:
    if mode == "unordered" and args_mode in SWAPPED:
        return  # agentevals compares these arguments both ways round: not comparable
    evaluator = agentevals_match.create_trajectory_match_evaluator(
        trajectory_match_mode=mode, tool_args_match_mode=args_mode
    )
    theirs = evaluator(outputs=messages(outputs), reference_outputs=messages(reference))["score"]
    ours_args = SWAPPED.get(args_mode, args_mode) if mode == "subset" else args_mode
    ours = match(messages(outputs), messages(reference), mode=mode, args_mode=ours_args)
    if mode == "strict" or (unique_names(outputs) and unique_names(reference)):
        assert ours == theirs
    else:
        assert ours or not theirs  # one-to-one finds every greedy match, and more
