"""Checks on the tool calls of an attempt: a tool called or not called, an argument's value,
an ordering between tools, no repeated identical call.

Where a detector already decides the question (PG102 forbidden tool, PG103 required tool,
PG106 ordering, PG107 loop signature) the check runs that detector with the item's params.
"""

from __future__ import annotations

import math
from typing import Any

from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.checks.registry import (
    AttemptEvidence,
    Check,
    CheckOutcome,
    CheckParams,
    Fixture,
    detect,
    from_findings,
)
from pathgrade.batch_plane.scoring.trajectory import frozen_json
from pathgrade.content.fingerprints import TenantKey
from pathgrade.content.fingerprints import same_value as fingerprint_equal
from pathgrade.detectors.tool_calls import (
    FORBIDDEN,
    LOOP,
    ORDERING,
    REQUIRED,
    LoopParams,
    OrderingParams,
    OrderRule,
    ToolNamesParams,
)
from pathgrade.detectors.view import ToolCall
from pydantic import Field

_LOOKUP = ("lookup_order", {"order_id": "A1001"})
_REFUND = ("issue_refund", {"order_id": "A1001"})


class ToolParams(CheckParams):
    """One tool, by name."""

    tool: str = Field(min_length=1)


TOOL_CALLED = Check(
    name="tool_called",
    doc="The attempt called `tool` at least once (PG103 `required-tool-not-called` with the "
    "item's tool). Names are compared exactly.",
    params=ToolParams,
    passing=Fixture({"tool": "lookup_order"}, FixtureAttempt(calls=(_LOOKUP,))),
    failing=Fixture(
        {"tool": "lookup_order"}, FixtureAttempt(calls=(("search_kb", {"query": "A1001"}),))
    ),
)


@TOOL_CALLED.register
def tool_called(params: ToolParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG103 with the one required tool."""
    required = ToolNamesParams(tools=frozenset({params.tool}))
    return from_findings(detect(REQUIRED, required, evidence))


class ForbiddenCallParams(CheckParams):
    """A tool that must not be called; with `args`, only calls whose arguments hold each of
    these values are forbidden."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


TOOL_NOT_CALLED = Check(
    name="tool_not_called",
    doc="The attempt never called `tool` (PG102 `forbidden-tool-called` with the item's "
    "tool); with `args`, no call of `tool` had all of those argument values (compared by "
    "the collector's fingerprints when they were not captured; a call whose arguments are "
    "neither captured nor fingerprinted leaves the check undecided). A regression item's "
    "forbidden calls are this check.",
    params=ForbiddenCallParams,
    passing=Fixture({"tool": "issue_refund"}, FixtureAttempt(calls=(_LOOKUP,))),
    failing=Fixture(
        {"tool": "issue_refund", "args": {"order_id": "A1001"}},
        FixtureAttempt(calls=(_LOOKUP, _REFUND)),
    ),
)


@TOOL_NOT_CALLED.register
def tool_not_called(params: ForbiddenCallParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG102 for the tool; with `args`, each call of it compared argument by argument."""
    if not params.args:
        return from_findings(
            detect(FORBIDDEN, ToolNamesParams(tools=frozenset({params.tool})), evidence)
        )
    calls = [c for c in evidence.view.tool_calls if c.name == params.tool]
    verdicts = [_holds_all(call, params.args, evidence.key) for call in calls]
    wanted = ", ".join(f"{k}={v!r}" for k, v in params.args.items())
    if True in verdicts:
        return CheckOutcome.fail(f"Forbidden call {params.tool}({wanted}) was made.")
    if None in verdicts:
        return CheckOutcome.undecided(
            f"Arguments of {params.tool} were neither captured nor comparable by "
            f"fingerprint: cannot tell whether it was called with {wanted}."
        )
    return CheckOutcome.ok()


def _holds_all(call: ToolCall, values: dict[str, Any], key: TenantKey | None) -> bool | None:
    """Whether the call had every one of `values`; None when that is unknown."""
    verdicts = [argument_is(call, name, value, key) for name, value in values.items()]
    if False in verdicts:
        return False
    return None if None in verdicts else True


def argument_is(
    call: ToolCall,
    name: str,
    expected: Any,
    key: TenantKey | None,
    tolerance: float | None = None,
) -> bool | None:
    """Whether `call` had argument `name` equal to `expected` (numbers within
    `tolerance`): by the collector's fingerprint of it (taken before any scrubbing) when
    there is one and the tenant's `key`, else by its captured value; None when neither
    decides. A fingerprint proves equality only: a different one with a tolerance, and
    no captured value, is undecided."""
    if call.argument_fps is not None and key is not None:
        if name not in call.argument_fps:
            return False
        equal = fingerprint_equal(call.argument_fps[name], key.fingerprint(expected))
        if equal or (equal is False and tolerance is None):
            return equal
    if call.arguments is None:
        return None
    return name in call.arguments and same_value(call.arguments[name], expected, tolerance)


def same_value(actual: Any, expected: Any, tolerance: float | None = None) -> bool:
    """JSON equality (a number is never a boolean, key order does not matter); numbers
    within `tolerance` when one is given."""
    numbers = all(_is_number(v) for v in (actual, expected))
    if tolerance is not None and numbers:
        return math.isfinite(actual) and abs(actual - expected) <= tolerance
    return frozen_json(actual) == frozen_json(expected)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ArgumentParams(CheckParams):
    """An argument of a tool and the value it must have (numbers within `tolerance`)."""

    tool: str = Field(min_length=1)
    argument: str = Field(min_length=1)
    value: Any
    tolerance: float | None = Field(default=None, ge=0)


ARGUMENT_EQUALS = Check(
    name="argument_equals",
    doc="Some call of `tool` had `argument` equal to `value` (JSON equality: `1` is not "
    "`true`, object key order does not matter, `20.0` is `20`; numbers within `tolerance` "
    "when given). "
    "On default privacy settings the value is compared with the collector's fingerprint "
    "of the argument (run with the deployment's fact key; a fingerprint compares texts, "
    'so there `"7"` is `7`). Fails when the tool was not '
    "called or no call had the value; undecided when the arguments were neither captured "
    "nor fingerprinted (or only a fingerprint differs while a tolerance is given).",
    params=ArgumentParams,
    passing=Fixture(
        {"tool": "issue_refund", "argument": "amount", "value": 20},
        FixtureAttempt(calls=(("issue_refund", {"order_id": "A1001", "amount": 20.0}),)),
    ),
    failing=Fixture(
        {"tool": "lookup_order", "argument": "order_id", "value": "A1001"},
        FixtureAttempt(calls=(("lookup_order", {"order_number": "A1001"}),)),
    ),
)


@ARGUMENT_EQUALS.register
def argument_equals(params: ArgumentParams, evidence: AttemptEvidence) -> CheckOutcome:
    """Any call of the tool with the argument's value passes."""
    calls = [c for c in evidence.view.tool_calls if c.name == params.tool]
    if not calls:
        return CheckOutcome.fail(f"{params.tool} was not called.")
    wanted = params.argument
    verdicts = [
        argument_is(call, wanted, params.value, evidence.key, params.tolerance) for call in calls
    ]
    if True in verdicts:
        return CheckOutcome.ok()
    if None in verdicts:
        return CheckOutcome.undecided(
            f"Arguments of {params.tool} were neither captured nor comparable by fingerprint."
        )
    seen = [_seen_argument(call, wanted) for call in calls]
    within = f" ± {params.tolerance:g}" if params.tolerance is not None else ""
    return CheckOutcome.fail(
        f"{params.tool} was called with {'; '.join(seen)}, expected "
        f"{wanted}={params.value!r}{within}."
    )


def _seen_argument(call: ToolCall, name: str) -> str:
    """What a call had for argument `name`, for a reason: its captured value, or (known
    only by fingerprint) that it differed; or the argument names it had instead."""
    if call.arguments is not None and name in call.arguments:
        return f"{name}={call.arguments[name]!r}"
    if name in (call.argument_fps or {}):
        return f"another {name} (compared by fingerprint: not captured)"
    return f"no {name} (arguments: {', '.join(sorted(call.argument_names())) or 'none'})"


class OrderParams(CheckParams):
    """`before` must have been called (successfully, in this turn or an earlier one)
    before any call of `after`."""

    before: str = Field(min_length=1)
    after: str = Field(min_length=1)


ORDER = Check(
    name="ordering",
    doc="Every call of `after` came after a successful call of `before` in this turn or an "
    "earlier turn of the conversation (PG106 `ordering-broken` with the item's rule). "
    "Passes when `after` was never called.",
    params=OrderParams,
    passing=Fixture(
        {"before": "lookup_order", "after": "issue_refund"},
        FixtureAttempt(calls=(_LOOKUP, _REFUND)),
    ),
    failing=Fixture(
        {"before": "lookup_order", "after": "issue_refund"}, FixtureAttempt(calls=(_REFUND,))
    ),
)


@ORDER.register
def ordering(params: OrderParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG106 with the one rule."""
    rule = OrderRule(before=params.before, after=params.after)
    return from_findings(detect(ORDERING, OrderingParams(rules=[rule]), evidence))


class RepeatParams(CheckParams):
    """How many identical calls (same tool, same arguments) one attempt may make."""

    max_repeats: int = Field(default=1, ge=1)


NO_REPEATED_CALL = Check(
    name="no_repeated_call",
    doc="No tool was called with identical arguments more than `max_repeats` times (default "
    "once; PG107 `loop-signature` with the item's limit: arguments compared canonically, "
    "idempotency keys ignored). Undecided when a repeated tool's arguments were not "
    "captured.",
    params=RepeatParams,
    passing=Fixture({}, FixtureAttempt(calls=(_LOOKUP, ("lookup_order", {"order_id": "A1002"})))),
    failing=Fixture({}, FixtureAttempt(calls=(_LOOKUP, _LOOKUP))),
)


@NO_REPEATED_CALL.register
def no_repeated_call(params: RepeatParams, evidence: AttemptEvidence) -> CheckOutcome:
    """PG107 with the item's limit."""
    return from_findings(detect(LOOP, LoopParams(max_repeats=params.max_repeats), evidence))
