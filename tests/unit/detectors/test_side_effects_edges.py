"""PG108, PG109 and PG111 at their edges: uncaptured writes of different tools are not
repeats, the writes budget is zero or more, and a call of unknown effect is no
irreversible one."""

from __future__ import annotations

import pytest
from pathgrade.detectors.side_effects import WritesPerTurnParams
from pydantic import ValidationError

from tests.support.traces import TraceBuilder, detect


def test_uncaptured_writes_are_undecided_only_when_one_tool_repeats() -> None:
    different = TraceBuilder()
    different.tool("change_plan", None, effect="write")
    different.tool("open_ticket", None, effect="write")
    assert detect("PG108", different.build()) == []
    repeated = TraceBuilder()
    repeated.tool("change_plan", None, effect="write")
    repeated.tool("change_plan", None, effect="write")
    (undecided,) = detect("PG108", repeated.build())
    assert undecided.kind == "cannot_decide"


def test_the_writes_budget_is_zero_or_more() -> None:
    assert WritesPerTurnParams(max_writes=0).max_writes == 0
    with pytest.raises(ValidationError, match="max_writes"):
        WritesPerTurnParams(max_writes=-1)


def test_a_call_of_unknown_effect_needs_no_confirmation() -> None:
    b = TraceBuilder()
    b.tool("mystery_tool", {"x": "1"})  # no effect declared, none in the policy
    assert detect("PG111", b.build()) == []
