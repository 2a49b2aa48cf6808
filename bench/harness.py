"""Benchmark the offline harness's scoring of one attempt.

One attempt of a refund item (confirmation, lookup and refund calls, a final answer), scored
two ways in the same process, interleaved batch by batch:

- baseline: the trajectory metrics alone (`tool_correctness`, `argument_correctness`,
  `trajectory_match`, `reference_match`), what `score_attempt` computed before the harness;
- harness: `score_attempts` in full (as `run_eval` scores a run): those, the item's
  per-case checks (three), every detector of the default policy as a metric, `sound`,
  `goal_completed` and the efficiency metrics, with their Score records.

Prints CPU microseconds per attempt of each (process time, best batch) and their ratio.
`--default-privacy` scores the trace the collector stores on default settings (no
argument or message captured, facts with a tenant key: values compared by fingerprint).

    python bench/harness.py [--attempts 2000] [--batches 7] [--default-privacy]
"""

from __future__ import annotations

import argparse
import time

from pathgrade.batch_plane.agents.adapters import AgentTurn
from pathgrade.batch_plane.evaluation.datasets import DatasetItem
from pathgrade.batch_plane.evaluation.runs import (
    Attempt,
    argument_correctness,
    attempted_calls,
    reference_match,
    score_attempt,
    score_attempts,
    trajectory_matches,
)
from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.trajectory import tool_correctness
from pathgrade.content.fingerprints import FactSecret
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


def baseline(attempt: Attempt, trace: Trace, secret: FactSecret | None) -> None:
    called = attempted_calls(trace)
    key = secret.for_tenant(trace.tenant) if secret is not None else None
    tool_correctness(called, ITEM.expected_tool_calls)
    argument_correctness(called, ITEM.expected_tool_calls, key)
    trajectory_matches(ITEM, called)
    reference_match(ITEM.reference_answer or "", ANSWER)


def best_us(attempts: int, trace: Trace, full: bool, secret: FactSecret | None) -> float:
    """CPU microseconds per attempt of one batch of `attempts` (repeats of the item)."""
    state = {"account": {"refunds": ["A2001"]}}
    batch = [Attempt(ITEM, n, AgentTurn(response=ANSWER), end_state=state) for n in range(attempts)]
    started = time.process_time()
    if full:
        score_attempts(batch, {a.key: trace for a in batch}, "run-bench", secret=secret)
    else:
        for attempt in batch:
            baseline(attempt, trace, secret)
    return (time.process_time() - started) / attempts * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--default-privacy", action="store_true")
    args = parser.parse_args()
    attempt = FixtureAttempt(calls=CALLS, answer=ANSWER)
    secret = FactSecret(bytes(32)) if args.default_privacy else None
    trace = (
        attempt.trace() if secret is None else attempt.redacted_trace(secret.for_tenant("default"))
    )
    results: dict[str, list[float]] = {"baseline": [], "harness": []}
    for _ in range(args.batches):
        results["baseline"].append(best_us(args.attempts, trace, False, secret))
        results["harness"].append(best_us(args.attempts, trace, True, secret))
    base, full = min(results["baseline"]), min(results["harness"])
    print(f"trajectory metrics only: {base:8.1f} us CPU per attempt")
    one = Attempt(ITEM, 0, AgentTurn(response=ANSWER))
    scores = len(score_attempt(one, trace, "r", secret=secret))
    print(f"full harness scoring:    {full:8.1f} us CPU per attempt ({scores} scores)")
    print(f"ratio harness / trajectory metrics: {full / base:.1f}x")


if __name__ == "__main__":
    main()
