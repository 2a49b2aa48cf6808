"""Scoring traces: the per-trace scorer set (shared by online and offline scoring) and
`score_run`, which scores every trace of a run (spans whose EvalRunId is the run).

Metrics pathgrade scores from a trace alone:
- `claimed_actions` (deterministic, PG116 reused: see batch_plane.hallucination);
- judge metrics, one rubric each: `task_completion`, `faithfulness`, `plan_quality`,
  `unsupported_claims`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from batch_plane.hallucination import claimed_action_findings, claimed_actions_score, judge_inputs
from batch_plane.judge import BudgetExhausted, Judge
from batch_plane.rubrics import load_rubric
from batch_plane.scores import Score, write_scores
from batch_plane.store import Store
from batch_plane.trace_rows import load_trace, run_trace_ids
from schemas.model import Trace

DETERMINISTIC_METRICS = ("claimed_actions",)
JUDGE_METRICS = ("task_completion", "faithfulness", "plan_quality", "unsupported_claims")
TRACE_METRICS = DETERMINISTIC_METRICS + JUDGE_METRICS
CLAIMED_ACTIONS_VERSION = "pg116@1"


class UnknownMetric(ValueError):
    """A metric this scorer cannot compute from a trace."""


@dataclass(frozen=True)
class TraceScorer:
    """Scores one trace with `metrics`; judge metrics need `judge`."""

    metrics: tuple[str, ...]
    judge: Judge | None = None
    slices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [m for m in self.metrics if m not in TRACE_METRICS]
        if unknown:
            raise UnknownMetric(
                f"cannot score {', '.join(unknown)} from a trace; known: {', '.join(TRACE_METRICS)}"
            )
        judged = [m for m in self.metrics if m in JUDGE_METRICS]
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
        inputs = judge_inputs(trace) if any(m in JUDGE_METRICS for m in self.metrics) else {}
        for metric in self.metrics:
            if metric == "claimed_actions":
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
            else:
                scores.append(self._judged(metric, inputs, base))
        return scores

    def _judged(self, metric: str, inputs: dict, base: dict) -> Score:
        assert self.judge is not None
        rubric = load_rubric(metric)
        result = self.judge.evaluate(rubric, {k: inputs[k] for k in rubric.inputs})
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
) -> RunScoring:
    """Score every trace of run `run_id` (spans where EvalRunId = run_id)."""
    return score_traces(store, scorer, run_trace_ids(store, run_id), workers, progress)
