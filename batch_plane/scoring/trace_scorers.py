"""Scoring traces: the per-trace scorer set (shared by online and offline scoring) and
`score_run`, which scores every trace of a run (spans whose EvalRunId is the run).

Metrics pathgrade scores from a trace alone:
- `claimed_actions` (deterministic, PG116 reused: see pathgrade.batch_plane.scoring.hallucination);
- judge metrics, one rubric each: `task_completion`, `faithfulness`, `plan_quality`,
  `unsupported_claims`, and `handoff_context` for a trace with a hand-off between two
  agents (a trace without one gets no score: there is nothing to grade).
From a trace and its dataset item's reference (offline runs):
- `trajectory_accuracy` (judge): the tool calls against the item's expected tool calls;
  a trace whose item has no reference gets no score (the gate fails it as missing).
Over the repeats of one dataset item in a run (EDGE response consistency):
- `response_consistency` (judge, 1-4 scale) and `response_consistency_lexical` (mean
  pairwise token-set Jaccard, no model); one score per item with two or more answers,
  linked to the item's first trace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.scoring.hallucination import (
    claimed_action_findings,
    claimed_actions_score,
    judge_inputs,
)
from pathgrade.batch_plane.scoring.judge import BudgetExhausted, Judge, JudgeError
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.scoring.similarity import lexical_similarity, mean_pairwise
from pathgrade.batch_plane.store.trace_rows import load_trace, run_trace_ids
from pathgrade.schemas.evaluation_records import JUDGE_ERROR_LABEL
from pathgrade.schemas.model import Trace
from pathgrade.schemas.store import Store

DETERMINISTIC_METRICS = ("claimed_actions",)
JUDGE_METRICS = (
    "task_completion", "faithfulness", "plan_quality", "unsupported_claims", "handoff_context",
)  # fmt: skip
HANDOFF_METRICS = ("handoff_context",)
"""Judge metrics of the hand-offs between agents: a turn without one gets no score."""
TRACE_METRICS = DETERMINISTIC_METRICS + JUDGE_METRICS
REFERENCE_METRICS = ("trajectory_accuracy",)
ITEM_METRICS = ("response_consistency", "response_consistency_lexical")
LEXICAL_CONSISTENCY_VERSION = "token-jaccard@1"
CLAIMED_ACTIONS_VERSION = "pg116@1"


class UnknownMetric(ValueError):
    """A metric this scorer cannot compute from a trace."""


@dataclass(frozen=True)
class TraceScorer:
    """Scores one trace with `metrics`; judge metrics need `judge`."""

    metrics: tuple[str, ...]
    judge: Judge | None = None
    slices: tuple[str, ...] = ()
    references: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Dataset item id -> its expected tool calls, for `trajectory_accuracy`."""
    rubric_refs: Mapping[str, str] = field(default_factory=dict)
    """Metric -> pinned rubric ref (`faithfulness@1`); others use the newest version."""
    record_judge_failures: bool = False
    """On a failed judge call write a `judge_error` score without a value (the gate counts
    it as missing) and keep the trace's other scores, instead of raising."""

    def __post_init__(self) -> None:
        known = TRACE_METRICS + REFERENCE_METRICS
        unknown = [m for m in self.metrics if m not in known]
        if unknown:
            raise UnknownMetric(
                f"cannot score {', '.join(unknown)} from a trace; known: {', '.join(known)}"
            )
        judged = [m for m in self.metrics if m in JUDGE_METRICS + REFERENCE_METRICS]
        if judged and self.judge is None:
            raise UnknownMetric(f"judge metrics {', '.join(judged)} need a judge endpoint")

    def score(self, trace: Trace) -> list[Score]:
        """Every metric's score of `trace` (raises BudgetExhausted, JudgeError)."""
        root = trace.root
        base = {
            "tenant": trace.tenant,
            "trace_id": trace.trace_id,
            "span_id": root.span_id if root else "",
            "dataset_item_id": root.eval.dataset_item_id if root else "",
            "run_id": root.eval.run_id if root else "",
            "repeat": (root.eval.replay_index or 0) if root else 0,
            "slices": self._slices(trace),
        }
        scores = []
        judged = JUDGE_METRICS + REFERENCE_METRICS
        inputs = judge_inputs(trace) if any(m in judged for m in self.metrics) else {}
        for metric in self.metrics:
            if metric in REFERENCE_METRICS:
                reference = self.references.get(base["dataset_item_id"])
                if reference is not None:
                    with_reference = {**inputs, "reference_trajectory": reference}
                    scores.append(self._judged(metric, with_reference, base))
            elif metric == "claimed_actions":
                value, label, why = claimed_actions_score(claimed_action_findings(trace))
                scores.append(
                    Score(
                        metric,
                        "claimed_actions",
                        CLAIMED_ACTIONS_VERSION,
                        value=value,
                        label=label,
                        explanation=why,
                        **base,
                    )
                )
            elif metric in HANDOFF_METRICS and not inputs["handoffs"]:
                continue
            else:
                scores.append(self._judged(metric, inputs, base))
        return scores

    def _judged(self, metric: str, inputs: dict, base: dict) -> Score:
        assert self.judge is not None
        rubric = load_rubric(self.rubric_refs.get(metric, metric))
        try:
            result = self.judge.evaluate(rubric, {k: inputs[k] for k in rubric.inputs})
        except (JudgeError, BudgetExhausted) as exc:
            if not self.record_judge_failures:
                raise
            return Score(
                metric, f"judge:{rubric.id}", rubric.ref, value=None, label=JUDGE_ERROR_LABEL,
                explanation=f"judge failed: {exc}", judge_model=self.judge.endpoint.model,
                rubric_version=rubric.ref, **base,
            )  # fmt: skip
        score = result.verdict.score
        return Score(
            metric, f"judge:{rubric.id}", rubric.ref,
            value=rubric.scale.normalise(score),
            label="pass" if score >= rubric.scale.pass_at else "fail",
            explanation=result.verdict.explanation,
            judge_model=self.judge.endpoint.model, rubric_version=rubric.ref, **base,
        )  # fmt: skip

    def _slices(self, trace: Trace) -> dict[str, str]:
        """Suite slice values from the root span's attributes of the same name."""
        attributes = trace.root.attributes if trace.root else {}
        return {name: str(attributes[name]) for name in self.slices if name in attributes}

    def item_scores(self, traces: Sequence[Trace], metrics: Sequence[str]) -> list[Score]:
        """`ITEM_METRICS` over the answers each dataset item got across the traces (its
        repeats); items with fewer than two answers get none."""
        unknown = [m for m in metrics if m not in ITEM_METRICS]
        if unknown:
            raise UnknownMetric(f"not an item metric: {', '.join(unknown)}")
        if "response_consistency" in metrics and self.judge is None:
            raise UnknownMetric("judge metric response_consistency needs a judge endpoint")
        by_item: dict[str, list[Trace]] = {}
        for trace in traces:
            item = trace.root.eval.dataset_item_id if trace.root else ""
            if item:
                by_item.setdefault(item, []).append(trace)
        scores = []
        for item, repeats in sorted(by_item.items()):
            if len(repeats) < 2:
                continue
            repeats.sort(key=lambda t: t.root.eval.replay_index or 0)  # type: ignore[union-attr]
            first, root = repeats[0], repeats[0].root
            assert root is not None
            base = {
                "tenant": first.tenant, "trace_id": first.trace_id, "span_id": root.span_id,
                "dataset_item_id": item, "run_id": root.eval.run_id, "repeat": 0,
                "slices": self._slices(first),
            }  # fmt: skip
            answers = [judge_inputs(t)["answer"] for t in repeats]
            for metric in metrics:
                if metric == "response_consistency":
                    inputs = {"question": judge_inputs(first)["question"], "answers": answers}
                    scores.append(self._judged(metric, inputs, base))
                else:
                    why = f"mean pairwise token Jaccard of {len(answers)} answers"
                    value = mean_pairwise(answers, lexical_similarity)
                    lexical = Score(
                        metric, "lexical", LEXICAL_CONSISTENCY_VERSION, value=value,
                        explanation=why, **base,
                    )  # fmt: skip
                    scores.append(lexical)
        return scores


@dataclass
class RunScoring:
    """How far a scoring job got."""

    traces: int
    scored: int = 0
    scores: int = 0
    stopped: str = ""  # why the job stopped early ("" when it finished)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"scored {self.scored} of {self.traces} traces ({self.scores} scores)"
        return f"{text}; stopped: {self.stopped}" if self.stopped else text


def score_traces(
    store: Store,
    scorer: TraceScorer,
    trace_keys: Sequence[tuple[str, str]],
    workers: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> RunScoring:
    """Load, score and store each (tenant, trace id); stops cleanly at the judge budget."""
    outcome = RunScoring(traces=len(trace_keys))
    lock = threading.Lock()

    def one(key: tuple[str, str]) -> None:
        trace = load_trace(store, *key)
        if trace is None:
            return
        scores = scorer.score(trace)
        write_scores(store, scores)
        with lock:
            outcome.scored += 1
            outcome.scores += len(scores)
            if progress:
                progress(outcome.scored, outcome.traces)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(one, key) for key in trace_keys]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        for future in futures:
            if future.cancelled() or not future.done():
                continue
            error = future.exception()
            if isinstance(error, BudgetExhausted):
                outcome.stopped = str(error)
            elif error is not None:
                raise error
    return outcome


def score_run(
    store: Store,
    run_id: str,
    scorer: TraceScorer,
    workers: int = 8,
    progress: Callable[[int, int], None] | None = None,
    item_metrics: Sequence[str] = (),
) -> RunScoring:
    """Score every trace of run `run_id` (spans where EvalRunId = run_id), then the
    `item_metrics` over each dataset item's repeats."""
    keys = run_trace_ids(store, run_id)
    outcome = score_traces(store, scorer, keys, workers, progress)
    if item_metrics and not outcome.stopped:
        traces = [t for t in (load_trace(store, *key) for key in keys) if t is not None]
        try:
            scores = scorer.item_scores(traces, item_metrics)
        except BudgetExhausted as exc:
            outcome.stopped = str(exc)
            return outcome
        write_scores(store, scores)
        outcome.scores += len(scores)
    return outcome
