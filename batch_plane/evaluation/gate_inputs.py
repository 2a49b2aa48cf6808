"""What the gate needs from the store: a run's scores, its budgets and the calibration of
the suite's judge.

- Scores: the `scores` rows of the run (FINAL; the latest value when several scorers wrote
  the same item, repeat and metric), as gate ScoreRecords with their label, explanation
  and trace. A null value (a metric that could not decide, a failed judge call) comes as a
  record without a value: the gate counts it apart and fails closed.
- Budgets: per task (a trace of the run), the latency is the root span's duration and the
  cost is the sum over its spans of tokens x the price table (detectors.prices). A task
  with a model missing from the price table has no cost observation.
- Calibration: `batch_plane.scoring.calibration.calibration_status` for the suite's (judge model,
  rubric version); when the table cannot be read, every judge metric is uncalibrated.
- Trajectories, for the diffs of failing cases: the expected calls of the items of the
  dataset versions a run used, and the calls the failing attempts' traces show.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pathgrade.batch_plane.evaluation.cases import Call
from pathgrade.batch_plane.evaluation.datasets import Datasets
from pathgrade.batch_plane.evaluation.gate import BudgetObservations, JudgeKey, ScoreRecord
from pathgrade.batch_plane.evaluation.suite import ConfigurationError, Suite
from pathgrade.batch_plane.scoring.calibration import calibration_status
from pathgrade.batch_plane.store import runs as stored_runs
from pathgrade.batch_plane.store import scores as stored_scores
from pathgrade.batch_plane.store import traces as stored_traces
from pathgrade.batch_plane.store.client import QueryError
from pathgrade.batch_plane.store.trace_rows import load_traces
from pathgrade.detectors.prices import PriceTable, cost_usd
from pathgrade.schemas import genai
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.store import Store


class MissingRun(ConfigurationError):
    """The run is not in the store (exit code 2)."""


def run_scores(store: Store, run_id: str) -> list[ScoreRecord]:
    """The run's scores as gate records; MissingRun when the store knows no such run."""
    rows = stored_scores.latest_of_run(store, run_id)
    if not rows and not stored_runs.exists(store, run_id):
        raise MissingRun([f"run {run_id!r}: not in the store (no run record and no scores)"])
    return [ScoreRecord(**row._asdict()) for row in rows]


@dataclass(frozen=True)
class TaskUsage:
    """One task's root duration and its token use per (provider, model)."""

    duration_ns: int
    tokens: dict[tuple[str, str], tuple[int, int]]


def run_usage(store: Store, run_id: str) -> list[TaskUsage]:
    """Per trace of the run: the root span's duration and the tokens of every model."""
    rows = stored_traces.run_token_rows(store, run_id)
    durations: dict[str, int] = {}
    tokens: dict[str, dict[tuple[str, str], tuple[int, int]]] = defaultdict(dict)
    for trace_id, provider, model, is_root, duration, input_tokens, output_tokens in rows:
        if is_root:
            durations[trace_id] = int(duration)
        if model and (input_tokens or output_tokens):
            before = tokens[trace_id].get((provider, model), (0, 0))
            tokens[trace_id][(provider, model)] = (
                before[0] + input_tokens,
                before[1] + output_tokens,
            )
    return [TaskUsage(durations[t], tokens.get(t, {})) for t in sorted(durations)]


def task_cost(usage: TaskUsage, prices: PriceTable) -> float | None:
    """USD cost of one task at list price; None when a model is not in the table."""
    total = 0.0
    for (provider, model), (input_tokens, output_tokens) in usage.tokens.items():
        cost = cost_usd(model, provider, input_tokens, output_tokens, prices)
        if cost is None:
            return None
        total += cost
    return total


def run_budgets(store: Store, run_id: str, prices: PriceTable) -> BudgetObservations:
    """Latency (s) and cost (USD) of every task of the run that can be priced."""
    usage = run_usage(store, run_id)
    costs = [task_cost(task, prices) for task in usage]
    return BudgetObservations(
        latencies_s=[task.duration_ns / 1e9 for task in usage],
        costs_usd=[cost for cost in costs if cost is not None],
    )


def judge_calibrations(store: Store, suite: Suite) -> dict[JudgeKey, bool]:
    """The calibration status of the suite's judge (none without a judge section)."""
    if suite.judge is None:
        return {}
    key = (suite.judge.model, suite.judge.rubric_version)
    try:
        return {key: calibration_status(store, *key)}
    except QueryError:  # no judge_calibrations table: fail closed
        return {key: False}


def run_expected_calls(store: Store, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Item id -> expected tool calls, over the dataset versions the run used."""
    recorded = stored_runs.agent_and_datasets(store, run_id)
    versions = recorded[1] if recorded else {}
    datasets = Datasets(store)
    return {
        item.item_id: item.expected_tool_calls
        for name, version in sorted(versions.items())
        for item in datasets.items(f"{name}@{version}")
    }


def trace_calls(store: Store, trace_ids: Sequence[str]) -> dict[str, list[Call]]:
    """Trace id -> its tool calls in execution order (arguments None when not captured)."""
    calls = {}
    for trace in load_traces(store, list(trace_ids)):
        calls[trace.trace_id] = [
            (span.genai.tool_name, _arguments(span.genai.tool_arguments))
            for span in trace.by_operation(genai.OP_EXECUTE_TOOL)
        ]
    return calls


def _arguments(text: str) -> dict[str, Any] | None:
    value = parse_json(text)
    return value if isinstance(value, dict) else None
