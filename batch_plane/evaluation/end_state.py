"""End-state oracles: whether the task succeeded, asked of the sandbox, not of the trace.

An item declares what the sandbox must hold after the attempt (`end_state`: a dotted path
into the state -> the value it must have, e.g. `{"account.plan": "premium"}`); the agent
adapter exposes the sandbox's state after each attempt (`AgentAdapter.end_state`: a Python
method of the agent, or an HTTP endpoint of the agent under test). `goal_completed` is 1
when every path holds its value, 0 with each mismatch named, and undecided (no value)
when the agent exposes no state: never from the trace's shape, so a guard that rightly
refused an out-of-bounds request reads as sound but not completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pathgrade.batch_plane.scoring.checks import CheckOutcome
from pathgrade.batch_plane.scoring.checks.calls import same_value

GOAL_COMPLETED = "goal_completed"
_ABSENT = object()


def check_paths(expected: Mapping[str, Any]) -> Mapping[str, Any]:
    """Validator body: every path is dotted names (or list indexes) without empty parts."""
    for path in expected:
        if not path or any(not part for part in path.split(".")):
            raise ValueError(f"{path!r} is not a dotted path such as account.plan")
    return expected


def lookup(state: Any, path: str) -> Any:
    """The value at a dotted path (digits index lists), or `_ABSENT`."""
    value = state
    for part in path.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _ABSENT
    return value


def goal_completed(
    expected: Mapping[str, Any], state: Mapping[str, Any] | None, unavailable: str = ""
) -> CheckOutcome:
    """The oracle's verdict: each expected path against the sandbox's state after the
    attempt; undecided when there is no state (`unavailable` says why)."""
    if state is None:
        return CheckOutcome.undecided(unavailable or "The agent exposes no end state.")
    mismatches = []
    for path, wanted in expected.items():
        found = lookup(state, path)
        if found is _ABSENT:
            mismatches.append(f"{path} is absent, expected {wanted!r}")
        elif not same_value(found, wanted):
            mismatches.append(f"{path} is {found!r}, expected {wanted!r}")
    if mismatches:
        return CheckOutcome.fail("End state: " + "; ".join(mismatches) + ".")
    return CheckOutcome.ok()
