"""TurnRollups: the realtime plane's counts of evaluated turns for the monitors
(`schemas.rollups`, table `monitor_rollups`).

Each turn counts once, at its first evaluation (a re-evaluation after late spans does
not count again), in the bucket of its top span's end: under `turns`, and under the
counter of each way it was not good (`incomplete`: evaluated before it was complete, or a
PG100 finding; `tool_error`; `finding:<code>` per detector with an alerting finding; the
latency and cost budgets the policy's objectives name). Each count is kept for all turns
(slice `""`) and per value of every slice the policy keeps (read from the turn's top span,
or a span enclosing that turn only). The plane hands the rows to the store with its alerts
(`take`), so they are stored before the offsets of their turns are committed; the totals
since start (tenant, service, agent and counter; no slices) are also served as metrics, for
the Prometheus rules generated from the same objectives.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pathgrade.content.turn_rollups import turn_end_ns, turn_example, turn_slices
from pathgrade.detectors.completeness import COMPLETENESS, turn_usage
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.realtime_plane.evaluate import Evaluation
from pathgrade.schemas.rollups import (
    EXAMPLES_PER_ROW,
    INCOMPLETE,
    TOOL_ERROR,
    TURNS,
    RollupKey,
    bucket_start,
    cost_counter,
    finding_counter,
    latency_counter,
)


class TurnRollups:
    """Counts of evaluated turns per rollup key, until the store takes them."""

    def __init__(self, monitors: MonitorsPolicy) -> None:
        self.monitors = monitors
        self._latency = sorted(monitors.latency_budgets())
        self._cost = sorted(monitors.cost_budgets())
        # RollupKey's fields as a plain tuple (a frozen dataclass per turn and counter cost
        # more than counting) -> [count, examples]
        self._counts: dict[tuple[Any, ...], list[Any]] = {}
        self.totals: Counter[tuple[str, str, str, str]] = Counter()

    def observe(self, evaluation: Evaluation) -> None:
        """Count a turn at its first evaluation."""
        due = evaluation.due
        if due.re_evaluation:
            return
        turn = due.turn
        bucket = bucket_start(turn_end_ns(turn), self.monitors.bucket_s)
        counters = self.counters(evaluation)
        example = turn_example(turn)
        for slice_ in turn_slices(turn, self.monitors.slices):
            for counter in counters:
                key = (
                    turn.tenant, "turns", counter, evaluation.service, evaluation.agent,
                    slice_, bucket,
                )  # fmt: skip
                entry = self._counts.setdefault(key, [0, []])
                entry[0] += 1
                if counter != TURNS and len(entry[1]) < EXAMPLES_PER_ROW:
                    entry[1].append(example)
        for counter in counters:
            self.totals[(turn.tenant, evaluation.service, evaluation.agent, counter)] += 1

    def counters(self, evaluation: Evaluation) -> list[str]:
        """`turns` and the counter of each way the turn was not good."""
        due, context = evaluation.due, evaluation.context
        view = context.view_of(due.turn)
        codes = sorted({finding.code for finding in evaluation.findings})
        counters = [TURNS]
        if due.incomplete or COMPLETENESS.code in codes:
            counters.append(INCOMPLETE)
        if any(call.failed for call in view.tool_calls):
            counters.append(TOOL_ERROR)
        counters += [finding_counter(code) for code in codes]
        if self._latency or self._cost:
            usage = turn_usage(view, context)
            latency_s = usage.latency_ms / 1000
            counters += [latency_counter(b) for b in self._latency if latency_s > b]
            cost = usage.cost_usd
            counters += [cost_counter(b) for b in self._cost if cost is not None and cost > b]
        return counters

    def take(self) -> list[list[Any]]:
        """The rows counted since the last call (ROLLUP_COLUMNS order); empties the counts."""
        counts, self._counts = self._counts, {}
        return [RollupKey(*key).row(count, examples) for key, (count, examples) in counts.items()]

    def figures(self) -> list[dict[str, Any]]:
        """The totals since start, one mapping per (tenant, service, agent, counter)."""
        return [
            {"tenant": tenant, "service": service, "agent": agent, "counter": counter,
             "turns": turns}
            for (tenant, service, agent, counter), turns in sorted(self.totals.items())
        ]  # fmt: skip
