"""The realtime plane's turn rollups: each turn counts once, in the bucket of its end, under
`turns` and under each way it was not good, for all turns and per slice value."""

from __future__ import annotations

from collections import defaultdict

from pathgrade.detectors import default_policy
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.realtime_plane.rollups import TurnRollups
from pathgrade.schemas.model import Trace
from pathgrade.schemas.rollups import ROLLUP_COLUMNS

from tests.support.traces import TraceBuilder, in_server_span

SECOND = 1_000_000_000
MONITORS = MonitorsPolicy.model_validate({
    "bucket_s": 10, "slices": ["app.intent"],
    "objectives": [
        {"name": "slow", "good": "latency_under", "budget": 2.0, "objective": 0.9,
         "windows": [{"long_s": 60, "short_s": 10, "burn_rate": 2, "severity": "high"}]},
        {"name": "costly", "good": "cost_under", "budget": 0.0001, "objective": 0.9,
         "windows": [{"long_s": 60, "short_s": 10, "burn_rate": 2, "severity": "high"}]},
    ],
})  # fmt: skip


def turn(
    number: int, *, error: bool = False, intent: str | None = None, seconds: float = 1.0
) -> Trace:
    """A turn ending at second 1,000 + `number` that lasted `seconds`, one tool call
    (failed with `error`), one model call of 100 + 20 tokens."""
    attributes = {"app.intent": intent} if intent else {}
    builder = TraceBuilder(f"{number:032x}", root_attributes=attributes)
    builder.chat(tokens=(100, 20))
    builder.tool("lookup_order", {"order": 1}, error="timeout" if error else "")
    trace = builder.build()
    root = trace.root
    assert root is not None
    root.end_ns = (1000 + number) * SECOND
    root.start_ns = root.end_ns - int(seconds * SECOND)
    return trace


def observe(rollups: TurnRollups, trace: Trace, reason: str = "quiet", again: bool = False):
    evaluation = TurnEvaluator(default_policy()).evaluate(
        DueTurn(trace, reason, again),
        0,  # type: ignore[arg-type]
    )
    rollups.observe(evaluation)
    return evaluation


def counts(rows: list[list]) -> dict[tuple[str, str, int], int]:
    """(counter, slice, bucket start) -> count, from rows of every service and agent."""
    out: dict[tuple[str, str, int], int] = defaultdict(int)
    for row in rows:
        fields = dict(zip(ROLLUP_COLUMNS, row, strict=True))
        assert (fields["Source"], fields["Value"]) == ("turns", 0.0)
        out[(fields["Name"], fields["Slice"], fields["BucketStart"])] += fields["Count"]
    return dict(out)


def test_turns_count_in_the_bucket_of_their_end_with_what_was_not_good() -> None:
    rollups = TurnRollups(MONITORS)
    observe(rollups, turn(1, error=True, intent="refund", seconds=3))
    observe(rollups, turn(2, intent="refund"))
    observe(rollups, turn(11, intent="status"))
    observe(rollups, turn(12), reason="max_age")
    rows = rollups.take()
    assert counts(rows) == {
        ("turns", "", 1000): 2, ("turns", "app.intent=refund", 1000): 2,
        ("turns", "", 1010): 2, ("turns", "app.intent=status", 1010): 1,
        # the failed call: PG101 alerts on it, and it is a tool error
        ("tool_error", "", 1000): 1, ("tool_error", "app.intent=refund", 1000): 1,
        ("finding:PG101", "", 1000): 1, ("finding:PG101", "app.intent=refund", 1000): 1,
        ("latency_over:2", "", 1000): 1, ("latency_over:2", "app.intent=refund", 1000): 1,
        # 100 + 20 tokens of gpt-4o-mini cost less than 0.0001 USD: no cost_over counter
        ("incomplete", "", 1010): 1,  # evaluated at its maximum age
    }  # fmt: skip
    examples = {(r[2], r[5]): r[9] for r in rows if r[2] == "tool_error"}
    assert examples[("tool_error", "")] == [f"{1:032x}/{1:016x}"]  # the turn's top span
    assert all(not r[9] for r in rows if r[2] == "turns")  # no examples of every turn
    assert rollups.take() == []  # taken once


def test_a_re_evaluated_turn_does_not_count_again_and_totals_add_up() -> None:
    rollups = TurnRollups(MONITORS)
    trace = turn(1, error=True)
    observe(rollups, trace)
    observe(rollups, trace, again=True)
    assert counts(rollups.take())[("turns", "", 1000)] == 1
    totals = {row["counter"]: row["turns"] for row in rollups.figures()}
    assert totals == {"turns": 1, "tool_error": 1, "finding:PG101": 1}


def test_a_turn_over_its_cost_budget_counts_under_it() -> None:
    cheap = MonitorsPolicy.model_validate({
        "objectives": [{"name": "c", "good": "cost_under", "budget": 0.00001,
                        "objective": 0.9}],
    })  # fmt: skip
    rollups = TurnRollups(cheap)
    observe(rollups, turn(1))
    assert ("cost_over:1e-05", "", 960) in counts(rollups.take())


def test_a_slice_is_read_from_a_span_enclosing_the_turn_and_a_missing_one_left_out() -> None:
    rollups = TurnRollups(MONITORS)
    observe(rollups, in_server_span(turn(1), {"app.intent": "refund"}))
    observe(rollups, turn(2))  # no intent anywhere: counted for all turns only
    assert counts(rollups.take()) == {
        ("turns", "", 1000): 2,
        ("turns", "app.intent=refund", 1000): 1,
    }
