"""Offline runs: drive an agent over dataset items, find the traces it emitted, score them
with the deterministic scorers and record the run (table `runs`, migration 0005).

A run has three steps, each its own function:

1. `drive` calls the agent adapter (batch_plane.agents.adapters) once per item and repeat, with
   the evaluation context (`pathgrade.run.id`, `pathgrade.dataset.item_id`,
   `pathgrade.replay.index`) as OTel baggage, so the agent's root span carries it;
2. `collect_traces` waits until the store holds a trace for every attempt (or times out);
3. `score_attempt` scores one attempt from what its trace shows the agent did and what the
   sandbox holds after it:
   - `tool_correctness` (expected tool names matched, DeepEval's deterministic score),
     `argument_correctness` (expected calls that were made with exactly the expected
     arguments: compared by fingerprint when the collector recorded one and the run has
     the deployment's fact secret, since the values themselves are not stored by default;
     by the captured values otherwise; no score when neither is known),
     `trajectory_match` (the ordered tool path equals the expected one or an acceptable
     alternative, arguments ignored) and `reference_match` (the answer contains the
     reference answer: task completion without a judge);
   - the item's per-case checks (`check.<name>` per check the item declares, `checks` for
     all of them; `batch_plane.scoring.checks`);
   - one metric per detector of the policy (`PG110`, ...), `sound` from them, and the
     efficiency metrics (`batch_plane.scoring.path_metrics`), all from the detectors the
     realtime plane runs, under the same policy;
   - `goal_completed` from the item's end-state oracle and the sandbox state the adapter
     exposed (`batch_plane.evaluation.end_state`);
   - the retrieval and plan metrics (`context_precision`, `context_recall`,
     `plan_adherence`, `step_efficiency`: `batch_plane.evaluation.layer_metrics`), and
     for an item without reference contexts, context precision and recall by the run's
     judge (`batch_plane.evaluation.judged_retrieval`; no value, and why, without one).
   An undecidable metric is stored without a value, labelled `cannot_decide`, with the
   reason. An attempt without a trace gets no scores, so the gate fails closed.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.agents.adapters import AdapterError, AgentAdapter, AgentTurn, TurnContext
from pathgrade.batch_plane.evaluation.datasets import DatasetItem, called_tools
from pathgrade.batch_plane.evaluation.end_state import GOAL_COMPLETED, goal_completed
from pathgrade.batch_plane.evaluation.judged_retrieval import judged_retrieval_scores
from pathgrade.batch_plane.evaluation.layer_metrics import (
    CANNOT_DECIDE,
    plan_metrics,
    retrieval_metrics,
)
from pathgrade.batch_plane.scoring.checks import AttemptEvidence, CheckOutcome, all_of, run_checks
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.path_metrics import SOUND, detector_outcomes, efficiency, sound
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.scoring.trajectory import match, tool_correctness
from pathgrade.batch_plane.store.trace_rows import load_traces, run_trace_ids
from pathgrade.content.agent_turns import only_turn
from pathgrade.content.fingerprints import FactSecret, TenantKey
from pathgrade.content.predicates import call_arguments
from pathgrade.detectors import Policy, ResolvedPolicy, default_policy, run_detectors, turn_digest
from pathgrade.schemas import genai
from pathgrade.schemas.model import EvalContext, Trace
from pathgrade.schemas.store import Store
from pathgrade.schemas.turns import TurnDigest

Progress = Callable[[int, int], None]
SCORER = "pathgrade.deterministic"
SCORER_VERSION = "2"
CHECKS = "checks"
CHECK_PREFIX = "check."
RUN_COLUMNS = [
    "RunId", "Suite", "SuiteVersion", "Agent", "DatasetVersions", "StartedAt", "FinishedAt",
    "Status", "Seed", "Params", "UpdatedAt",
]  # fmt: skip
AttemptKey = tuple[str, int]
"""(dataset item id, repeat)."""


@dataclass
class RunRecord:
    """One offline run as the `runs` table holds it."""

    run_id: str
    suite: str
    agent: str
    suite_version: str = ""
    dataset_versions: dict[str, int] = field(default_factory=dict)
    seed: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    status: str = "running"  # running, finished, failed
    started_at_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    finished_at_ms: int | None = None


def new_run_id() -> str:
    """A fresh run id: `run-` and 12 hex characters."""
    return f"run-{uuid.uuid4().hex[:12]}"


def record_run(store: Store, run: RunRecord) -> None:
    """Write (or re-write: latest wins under FINAL) the run's row."""
    store.insert(
        "runs",
        [[run.run_id, run.suite, run.suite_version, run.agent, run.dataset_versions,
          run.started_at_ms, run.finished_at_ms, run.status, run.seed, json.dumps(run.params),
          time.time_ns() // 1_000_000]],
        RUN_COLUMNS,
    )  # fmt: skip


@dataclass
class Attempt:
    """One call of the agent for one item and repeat, what it answered (or the error) and,
    for an item with an end-state oracle, the sandbox's state after it (or why not)."""

    item: DatasetItem
    repeat: int
    turn: AgentTurn | None = None
    error: str = ""
    end_state: dict[str, Any] | None = None
    state_error: str = ""

    @property
    def key(self) -> AttemptKey:
        return (self.item.item_id, self.repeat)


def drive(
    adapter: AgentAdapter,
    items: Sequence[DatasetItem],
    run: RunRecord,
    runs_per_item: int,
    progress: Progress | None = None,
    conversations: bool = False,
) -> list[Attempt]:
    """Call the agent `runs_per_item` times per item; an adapter error is kept, not raised.

    With `conversations`, consecutive items of the same `input["conversation_id"]` are the
    turns of one conversation: the agent's `state` is handed from one turn to the next.
    """
    attempts: list[Attempt] = []
    total = len(items) * runs_per_item
    states: dict[tuple[str, int], dict[str, Any]] = {}
    for item in items:
        conversation = item.conversation_id if conversations else ""
        for repeat in range(runs_per_item):
            attempt = Attempt(item, repeat)
            context = TurnContext(
                EvalContext(
                    dataset_item_id=item.item_id,
                    run_id=run.run_id,
                    replay_index=repeat,
                    suite_version=run.suite_version,
                )
            )
            try:
                state = states.get((conversation, repeat), {}) if conversation else {}
                attempt.turn = adapter.respond(state, item.user_message, context)
                states[(conversation, repeat)] = attempt.turn.state
            except AdapterError as error:
                attempt.error = str(error)
            if item.end_state and attempt.turn is not None:
                _read_end_state(adapter, attempt, context)
            attempts.append(attempt)
            if progress is not None:
                progress(len(attempts), total)
    return attempts


def _read_end_state(adapter: AgentAdapter, attempt: Attempt, context: TurnContext) -> None:
    """Ask the agent for its sandbox's state after the attempt; keep why when it cannot."""
    assert attempt.turn is not None
    try:
        attempt.end_state = adapter.end_state(attempt.turn.state, context)
    except AdapterError as error:
        attempt.state_error = f"The agent's end state could not be read: {error}"


def run_traces(store: Store, run_id: str) -> dict[AttemptKey, Trace]:
    """The stored traces of a run, keyed by the (item id, repeat) on their root span."""
    ids = [trace_id for _, trace_id in run_trace_ids(store, run_id)]
    found: dict[AttemptKey, Trace] = {}
    for trace in load_traces(store, ids):
        root = trace.root
        if root is not None and root.eval.run_id == run_id:
            found[(root.eval.dataset_item_id, root.eval.replay_index or 0)] = trace
    return found


def collect_traces(
    store: Store,
    run_id: str,
    expected: set[AttemptKey],
    timeout_s: float = 60.0,
    poll_s: float = 0.5,
) -> dict[AttemptKey, Trace]:
    """Wait until a trace of every expected attempt is stored, or `timeout_s` passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = run_traces(store, run_id)
        if expected <= found.keys() or time.monotonic() >= deadline:
            return found
        time.sleep(poll_s)


def attempted_calls(trace: Trace) -> list[dict[str, Any]]:
    """`called_tools` of the trace, each call with `captured` (its arguments were stored,
    or the collector saw it had none) and `fingerprint` (the collector's of its arguments,
    "" without facts)."""
    calls = called_tools(trace)
    for call, span in zip(calls, trace.by_operation(genai.OP_EXECUTE_TOOL), strict=True):
        facts = span.facts.arguments
        none_seen = span.facts.version > 0 and facts is None
        call["captured"] = call_arguments(span.genai.tool_arguments) is not None or none_seen
        call["fingerprint"] = facts.fingerprint if facts is not None else ""
    return calls


def argument_correctness(
    called: Sequence[Mapping[str, Any]],
    expected: Sequence[Mapping[str, Any]],
    key: TenantKey | None = None,
) -> float | None:
    """Share of expected calls that were made (same name, each call used once) with exactly
    the expected arguments; None when no expected call was made (nothing to compare) or
    when a made call's arguments are unknown (neither captured nor comparable by
    fingerprint: the gate then fails the metric as missing)."""
    unused = list(called)
    verdicts = []
    for want in expected:
        same_name = next((c for c in unused if c["name"] == want["name"]), None)
        if same_name is None:
            continue
        unused.remove(same_name)
        verdict = _same_arguments(same_name, want.get("args", {}), key)
        if verdict is None:
            return None
        verdicts.append(verdict)
    return sum(verdicts) / len(verdicts) if verdicts else None


def _same_arguments(
    call: Mapping[str, Any], expected: Mapping[str, Any], key: TenantKey | None
) -> bool | None:
    """Whether a made call had the expected arguments: by fingerprint (taken before any
    scrubbing) when both sides have one, else by captured value; None when unknown."""
    fingerprint = call.get("fingerprint")
    if fingerprint and key is not None:
        return fingerprint == key.fingerprint(dict(expected))
    if call.get("captured", True):
        return call.get("args", {}) == expected
    return None


def _as_path(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Calls as a message trajectory, one assistant message per call (order matters)."""
    return [{"role": "assistant", "tool_calls": [dict(call)]} for call in calls]


def trajectory_matches(item: DatasetItem, called: Sequence[Mapping[str, Any]]) -> float:
    """1.0 when the tool path equals the expected path or an acceptable alternative."""
    references = [item.expected_tool_calls, *item.alternative_trajectories]
    path = _as_path(called)
    hit = any(match(path, _as_path(ref), mode="strict", args_mode="ignore") for ref in references)
    return 1.0 if hit else 0.0


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def reference_match(reference: str, answer: str) -> float:
    """1.0 when the answer contains the reference answer (case and spacing ignored)."""
    return 1.0 if _normal(reference) in _normal(answer) else 0.0


Outcomes = dict[str, CheckOutcome]


def _service_and_agent(trace: Trace) -> tuple[str, str]:
    """The service and agent of the trace's agent turn (`only_turn`)."""
    top = only_turn(trace).root
    return (top.service_name, top.genai.agent_name) if top else ("", "")


def attempt_evidence(
    attempt: Attempt,
    trace: Trace,
    resolved: ResolvedPolicy,
    history: Sequence[TurnDigest] = (),
    secret: FactSecret | None = None,
) -> AttemptEvidence:
    """The attempt as checks and detector metrics see it: the trace's agent turn
    (`content.agent_turns.only_turn`: the realtime plane grades the same) under the
    policy resolved for its service and agent (with earlier turns of its conversation),
    the agent's answer, the findings of the policy's detectors and, given the deployment's
    fact `secret`, the trace tenant's key to compare values with the collector's
    fingerprints of uncaptured arguments."""
    context = resolved.context(history)
    turn = only_turn(trace)
    findings = tuple(run_detectors(turn, resolved, context))
    answer = attempt.turn.response if attempt.turn is not None else ""
    view = context.view_of(turn)
    key = secret.for_tenant(trace.tenant) if secret is not None else None
    return AttemptEvidence(view, context, answer, findings, frozenset(resolved.params), key)


def outcome_metrics(item: DatasetItem, attempt: Attempt, evidence: AttemptEvidence) -> Outcomes:
    """The pass/fail metrics of one attempt beyond the trajectory ones: per-case checks
    (each and all), each detector of the policy, `sound`, and the end-state oracle."""
    outcomes: Outcomes = {}
    checked = run_checks(item.checks, evidence)
    outcomes.update({CHECK_PREFIX + name: outcome for name, outcome in checked.items()})
    if checked:
        outcomes[CHECKS] = all_of(
            CheckOutcome(o.passed, f"{name}: {o.reason}" if o.reason else "")
            for name, o in checked.items()
        )
    detectors = detector_outcomes(evidence.findings, evidence.enabled)
    outcomes.update(detectors)
    outcomes[SOUND] = sound(detectors)
    if item.end_state:
        outcomes[GOAL_COMPLETED] = goal_completed(
            item.end_state, attempt.end_state, attempt.state_error
        )
    return outcomes


def score_attempt(
    attempt: Attempt,
    trace: Trace,
    run_id: str,
    policy: Policy | None = None,
    history: Sequence[TurnDigest] = (),
    secret: FactSecret | None = None,
    judge: Judge | None = None,
) -> list[Score]:
    """The scores of one attempt, linked to its trace, item and run. `policy` is the
    detectors' policy (default: every detector on); `history` the digests of earlier
    turns of the attempt's conversation; `secret` the deployment's fact secret (compares
    uncaptured arguments by fingerprint); `judge` grades the retrieval of an item without
    reference contexts."""
    resolved = (policy or default_policy()).resolve(*_service_and_agent(trace))
    evidence = attempt_evidence(attempt, trace, resolved, history, secret)
    return attempt_scores(attempt, trace, run_id, evidence, judge)


def attempt_scores(
    attempt: Attempt,
    trace: Trace,
    run_id: str,
    evidence: AttemptEvidence,
    judge: Judge | None = None,
) -> list[Score]:
    """`score_attempt` given the attempt's evidence.

    Expected-call metrics are scored when the item expects calls, or declares no checks
    (an item expecting nothing then scores calling nothing)."""
    item = attempt.item
    called = attempted_calls(trace)
    values: dict[str, float | None] = {}
    explanations: dict[str, str] = {}
    if item.expected_tool_calls or not item.checks:
        values["tool_correctness"] = tool_correctness(called, item.expected_tool_calls)
        values["argument_correctness"] = argument_correctness(
            called, item.expected_tool_calls, evidence.key
        )
        values["trajectory_match"] = trajectory_matches(item, called)
    if item.reference_answer is not None and attempt.turn is not None:
        values["reference_match"] = reference_match(item.reference_answer, attempt.turn.response)
    values = {metric: value for metric, value in values.items() if value is not None}
    labels: dict[str, str] = {}
    path = [call["name"] for call in called]
    measured = retrieval_metrics(item, attempt.turn) | plan_metrics(item, attempt.turn, path)
    for metric, (value, why) in measured.items():
        values[metric], explanations[metric] = value, why
        labels[metric] = CANNOT_DECIDE if value is None else ""
    for metric, outcome in outcome_metrics(item, attempt, evidence).items():
        values[metric] = None if outcome.passed is None else float(outcome.passed)
        labels[metric] = CANNOT_DECIDE if outcome.passed is None else ""
        explanations[metric] = outcome.reason
    for metric, value in efficiency(evidence.view, evidence.context).items():
        values[metric] = value
        labels[metric] = "" if value is not None else CANNOT_DECIDE
        explanations[metric] = "" if value is not None else "a model has no list price"
    root = trace.root
    base = {
        "tenant": trace.tenant,
        "trace_id": trace.trace_id,
        "span_id": root.span_id if root else "",
        "dataset_item_id": item.item_id,
        "run_id": run_id,
        "repeat": attempt.repeat,
        "slices": dict(item.slices),
    }
    deterministic = [
        Score(
            metric=metric,
            scorer=SCORER,
            scorer_version=SCORER_VERSION,
            value=value,
            label=labels.get(metric) or ("pass" if value == 1.0 else "fail"),
            explanation=explanations.get(metric, ""),
            **base,
        )
        for metric, value in values.items()
    ]
    return deterministic + judged_retrieval_scores(item, attempt.turn, judge, base)


def score_attempts(
    attempts: Sequence[Attempt],
    traces: Mapping[AttemptKey, Trace],
    run_id: str,
    policy: Policy | None = None,
    conversations: bool = False,
    secret: FactSecret | None = None,
    judge: Judge | None = None,
) -> list[Score]:
    """Every traced attempt's scores, in drive order; with `conversations`, each turn's
    detectors see the digests of the earlier turns of its conversation and repeat;
    `secret` and `judge` as for `score_attempt`."""
    histories: dict[tuple[str, int], list[TurnDigest]] = {}
    policy = policy or default_policy()
    resolved: dict[tuple[str, str], ResolvedPolicy] = {}
    scores = []
    for attempt in attempts:
        trace = traces.get(attempt.key)
        if attempt.turn is None or trace is None:
            continue
        conversation = attempt.item.conversation_id if conversations else ""
        history = histories.setdefault((conversation, attempt.repeat), [])
        scope = _service_and_agent(trace)
        if scope not in resolved:
            resolved[scope] = policy.resolve(*scope)
        evidence = attempt_evidence(attempt, trace, resolved[scope], history, secret)
        scores += attempt_scores(attempt, trace, run_id, evidence, judge)
        if conversation:
            history.append(turn_digest(evidence.view, conversation))
    return scores


@dataclass
class RunSummary:
    """What an eval run did: attempts, traces found, scores written, agent errors."""

    run: RunRecord
    attempts: int
    traces: int
    scores: int
    errors: list[str]


def run_eval(
    store: Store,
    adapter: AgentAdapter,
    items: Sequence[DatasetItem],
    run: RunRecord,
    runs_per_item: int,
    *,
    trace_timeout_s: float = 60.0,
    progress: Progress | None = None,
    flush: Callable[[], Any] | None = None,
    conversations: bool = False,
    policy: Policy | None = None,
    secret: FactSecret | None = None,
    judge: Judge | None = None,
) -> RunSummary:
    """Record the run, drive the agent, `flush` its span exporter, wait for its traces,
    score them (detectors under `policy`, default every detector on; `secret`: the
    deployment's fact secret, for arguments known only by fingerprint; `judge`: grades
    the retrieval of items without reference contexts), finish the run."""
    record_run(store, run)
    attempts = drive(adapter, items, run, runs_per_item, progress, conversations)
    if flush is not None:
        flush()
    answered = {a.key for a in attempts if a.turn is not None}
    traces = collect_traces(store, run.run_id, answered, trace_timeout_s)
    scores = score_attempts(attempts, traces, run.run_id, policy, conversations, secret, judge)
    write_scores(store, scores)
    errors = [f"{a.item.item_id} repeat {a.repeat}: {a.error}" for a in attempts if a.error]
    errors += [
        f"{key[0]} repeat {key[1]}: no trace stored" for key in sorted(answered - traces.keys())
    ]
    run.status = "finished" if not errors else "failed"
    run.finished_at_ms = time.time_ns() // 1_000_000
    record_run(store, run)
    return RunSummary(run, len(attempts), len(traces), len(scores), errors)
