"""Table `monitor_rollups`: counts per bucket of time that the monitors read instead of
scanning turns (docs/monitors.md, Rollups).

Two planes write it. The realtime plane counts each agent turn once, when it is first
evaluated (`Source` `turns`): every turn under `turns`, and the turns that were not good
under a counter each (`incomplete`, `tool_error`, `finding:PG108`, `latency_over:2.5`,
`cost_over:0.05`). The online scorer counts each score with a value (`Source` `scores`,
`Name` the metric, `Value` the score rounded to SCORE_DIGITS). A row is keyed by tenant,
service, agent, slice (`""` for all turns; `name=value` for a value of a slice the policy
keeps) and the bucket of the turn's end time; the table sums `Count` per key and keeps a
few example turns (`trace id/span id`) of one of the rows it merged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ROLLUP_COLUMNS: tuple[str, ...] = (
    "Tenant", "Source", "Name", "Service", "Agent", "Slice", "BucketStart", "Value", "Count",
    "Examples",
)  # fmt: skip
"""Column order of table `monitor_rollups` (schemas/migrations/0016_monitors.sql)."""
RollupSource = Literal["turns", "scores"]
SCORE_DIGITS = 3
"""A score's value is kept rounded to this many decimals (its bootstrap draws from them)."""
EXAMPLES_PER_ROW = 3

TURNS = "turns"
INCOMPLETE = "incomplete"
TOOL_ERROR = "tool_error"


def finding_counter(code: str) -> str:
    """The counter of turns with an alerting finding of detector `code`."""
    return f"finding:{code}"


def latency_counter(budget_s: float) -> str:
    """The counter of turns whose top span lasted longer than `budget_s`."""
    return f"latency_over:{budget_s:g}"


def cost_counter(budget_usd: float) -> str:
    """The counter of turns that cost more than `budget_usd` at list price."""
    return f"cost_over:{budget_usd:g}"


def slice_key(name: str, value: object) -> str:
    """The `Slice` of one value of slice `name`."""
    return f"{name}={value}"


@dataclass(frozen=True, slots=True)
class RollupKey:
    """Where a count goes: one row of `monitor_rollups` before its count."""

    tenant: str
    source: RollupSource
    name: str
    service: str
    agent: str
    slice: str
    bucket_start_s: int
    value: float = 0.0

    def row(self, count: int, examples: list[str]) -> list[Any]:
        """The row in ROLLUP_COLUMNS order."""
        return [
            self.tenant, self.source, self.name, self.service, self.agent, self.slice,
            self.bucket_start_s, self.value, count, examples[:EXAMPLES_PER_ROW],
        ]  # fmt: skip


def bucket_start(end_ns: int, bucket_s: int) -> int:
    """Unix seconds of the start of the bucket holding `end_ns`."""
    seconds = end_ns // 1_000_000_000
    return seconds - seconds % bucket_s
