"""Benchmark the offline harness's scoring of one attempt.

One attempt of a refund item (confirmation, lookup and refund calls, a final answer), scored
two ways in the same process, interleaved batch by batch:

- baseline: the trajectory metrics alone (`tool_correctness`, `argument_correctness`,
  `trajectory_match`, `reference_match`), what `score_attempt` computed before the harness;
- harness: `score_attempts` in full (as `run_eval` scores a run): those, the item's
  per-case checks (three), every detector of the default policy as a metric, `sound`,
  `goal_completed` and the efficiency metrics, with their Score records.

Prints CPU microseconds per attempt of each (process time, best batch) and their ratio.

    python bench/harness.py [--attempts 2000] [--batches 7]
"""

from __future__ import annotations

import argparse
import time

from pathgrade.batch_plane.agents.adapters import AgentTurn
from pathgrade.batch_plane.evaluation.datasets import DatasetItem, called_tools
from pathgrade.batch_plane.evaluation.runs import (
    Attempt,
    argument_correctness,
    reference_match,
    score_attempt,
    score_attempts,
    trajectory_matches,
)
from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.trajectory import tool_correctness
from pathgrade.schemas.model import Trace

ANSWER = "Refund issued for order A2001. Reference ORD-102001."
CALLS = (
    ("request_confirmation", {"action": "issue_refund", "order_id": "A2001"}),
    ("lookup_order", {"order_id": "A2001"}),
    ("issue_refund", {"order_id": "A2001"}),
)
ITEM = DatasetItem(
    item_id="refund-1",
    input="Please refund order A2001.",
    reference_answer="Refund issued for order A2001.",
    expected_tool_calls=[{"name": name, "args": args} for name, args in CALLS],
    checks=[
        {"check": "answer_regex", "pattern": r"\bORD-\d{6}\b"},
        {"check": "ordering", "before": "request_confirmation", "after": "issue_refund"},
        {"check": "budget", "max_tool_calls": 4, "max_cost_usd": 0.01},
    ],
    end_state={"account.refunds": ["A2001"]},
)


def baseline(attempt: Attempt, trace: Trace) -> None:
    called = called_tools(trace)
    tool_correctness(called, ITEM.expected_tool_calls)
    argument_correctness(called, ITEM.expected_tool_calls)
    trajectory_matches(ITEM, called)
    reference_match(ITEM.reference_answer or "", ANSWER)


def best_us(attempts: int, trace: Trace, full: bool) -> float:
    """CPU microseconds per attempt of one batch of `attempts` (repeats of the item)."""
    state = {"account": {"refunds": ["A2001"]}}
    batch = [Attempt(ITEM, n, AgentTurn(response=ANSWER), end_state=state) for n in range(attempts)]
    started = time.process_time()
    if full:
        score_attempts(batch, {a.key: trace for a in batch}, "run-bench")
    else:
        for attempt in batch:
            baseline(attempt, trace)
    return (time.process_time() - started) / attempts * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=7)
    args = parser.parse_args()
    trace = FixtureAttempt(calls=CALLS, answer=ANSWER).trace()
    results: dict[str, list[float]] = {"baseline": [], "harness": []}
    for _ in range(args.batches):
        results["baseline"].append(best_us(args.attempts, trace, full=False))
        results["harness"].append(best_us(args.attempts, trace, full=True))
    base, full = min(results["baseline"]), min(results["harness"])
    print(f"trajectory metrics only: {base:8.1f} us CPU per attempt")
    scores = len(score_attempt(Attempt(ITEM, 0, AgentTurn(response=ANSWER)), trace, "r"))
    print(f"full harness scoring:    {full:8.1f} us CPU per attempt ({scores} scores)")
    print(f"ratio harness / trajectory metrics: {full / base:.1f}x")


if __name__ == "__main__":
    main()
