"""EDGE metrics over the store: read an EDGE run's traces from `spans` and score them.

What is read (one trace per agent turn, see docs/edge.md "What the EDGE store reads"):

- the run manifest: the `pathgrade.edge.run` span's `pathgrade.edge.manifest` attribute;
- per turn, the root span: EvalDatasetItemId (scenario), EvalVariantId, EvalReplayIndex,
  `pathgrade.edge.attempt` / `pathgrade.edge.turn`, and the text of GenAIOutputMessages
  (the response; needs the collector's `--capture-messages`);
- nodes = the turn's walk (`batch_plane.edge.walks.turn_walk`: LangGraph node spans of
  OpenLLMetry or OpenInference, else the agents a turn transferred control between,
  else GenAI sub-agent spans), in order;
- actions = every `execute_tool` span's GenAIToolName and GenAIToolArguments (needs
  `--capture-tools`), in start order;
- hand-offs = the agent hand-offs of the turn (`batch_plane.edge.handoffs.turn_handoffs`:
  sender, receiver, transfer or delegation), counted over the run for the graph views.

The runs are then scored with batch_plane.edge.determinism, the same functions used in memory.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from statistics import fmean
from typing import Any

from pathgrade.batch_plane.edge.determinism import (
    convergence,
    judged_consistency,
    most_common,
    node_utility,
    replay_metrics,
    structural_adherence,
    variant_metrics,
)
from pathgrade.batch_plane.edge.graph import Scenario
from pathgrade.batch_plane.edge.handoffs import HandoffEdge, handoff_counts, turn_handoffs
from pathgrade.batch_plane.edge.simulation import (
    BASE_VARIANT,
    MANIFEST_SPAN,
    PG_EDGE_ATTEMPT,
    PG_EDGE_TURN,
    RunManifest,
)
from pathgrade.batch_plane.edge.traffic import infer_graph
from pathgrade.batch_plane.edge.walks import turn_walk
from pathgrade.batch_plane.scoring.judge import Judge, JudgeError
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.store import edge_runs
from pathgrade.batch_plane.store.trace_rows import find_trace_ids, load_traces, run_trace_ids
from pathgrade.content.graph_documents import load_graph
from pathgrade.schemas import genai
from pathgrade.schemas.agent_graph import AgentGraph
from pathgrade.schemas.model import Trace
from pathgrade.schemas.store import ReadableStore, Store

# The judged response-consistency hook: a scenario's intent and the responses of its exact
# replays in, a 1-4 consistency grade out (None: the judge could not decide). Without
# one, only the lexical score is reported.
ResponseConsistencyJudge = Callable[[str, Sequence[str]], float | None]


def rubric_consistency_judge(judge: Judge) -> ResponseConsistencyJudge:
    """The hook backed by a judge model and the shipped `response_consistency` rubric
    (EDGE's 1-4 scale); a judge that gives no valid verdict leaves the grade undecided."""
    rubric = load_rubric("response_consistency")

    def grade(intent: str, responses: Sequence[str]) -> float | None:
        try:
            verdict = judge.evaluate(rubric, {"question": intent, "answers": list(responses)})
        except JudgeError:
            return None
        return float(verdict.verdict.score)

    return grade


TRAFFIC_LIMIT = 10_000
"""Traces read at most by one traffic command (`edge infer`, `edge traffic`, ...)."""


class EdgeRunNotFound(LookupError):
    """The store holds no EDGE run (manifest or turns) with this id."""


@dataclass
class TurnRecord:
    """One agent turn (one trace) of an EDGE run, as read from the store."""

    trace_id: str
    scenario_id: str
    variant_id: str
    replay_index: int | None
    attempt: int
    turn: int
    start_ns: int
    response: str = ""
    nodes: list[str] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    handoffs: list[HandoffEdge] = field(default_factory=list)

    @property
    def conversation(self) -> tuple[str, str, int | None]:
        """(scenario, variant, replay): the replay or variant this turn belongs to."""
        return (self.scenario_id, self.variant_id, self.replay_index)


def load_manifest(store: ReadableStore, run_id: str) -> RunManifest:
    """The run's manifest (EdgeRunNotFound when the run is unknown)."""
    text = edge_runs.manifest_text(store, run_id)
    if not text:
        raise EdgeRunNotFound(f"run {run_id!r}: no {MANIFEST_SPAN} span in the store")
    return RunManifest.model_validate_json(text)


def response_text(output_messages: str) -> str:
    """The text parts of GenAI output messages JSON ("" when absent or not JSON)."""
    try:
        messages = json.loads(output_messages) if output_messages else []
    except json.JSONDecodeError:
        return output_messages
    parts = [p for m in messages if isinstance(m, dict) for p in m.get("parts", [])]
    return " ".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")


def turn_record(trace: Trace) -> TurnRecord | None:
    """One stored trace as an agent turn (None for a trace without a root span)."""
    root = trace.root
    if root is None:
        return None
    attributes = root.attributes
    return TurnRecord(
        trace_id=trace.trace_id,
        scenario_id=root.eval.dataset_item_id,
        variant_id=root.eval.variant_id,
        replay_index=root.eval.replay_index,
        attempt=int(attributes.get(PG_EDGE_ATTEMPT) or 0),
        turn=int(attributes.get(PG_EDGE_TURN) or 0),
        start_ns=root.start_ns,
        response=response_text(root.genai.output_messages),
        nodes=[visit.node for visit in turn_walk(trace)],
        actions=[
            {"name": span.genai.tool_name, "args": span.genai.tool_arguments}
            for span in trace.by_operation(genai.OP_EXECUTE_TOOL)
        ],
        handoffs=turn_handoffs(trace),
    )


def load_turns(store: ReadableStore, run_id: str) -> list[TurnRecord]:
    """Every agent turn of the run with its nodes and actions, in conversation order."""
    ids = [trace_id for _, trace_id in run_trace_ids(store, run_id)]
    turns = [
        record
        for trace in load_traces(store, ids)
        if trace.root is not None and trace.root.name != MANIFEST_SPAN
        if (record := turn_record(trace)) is not None
    ]
    return sorted(turns, key=lambda t: (t.conversation, t.attempt, t.turn, t.start_ns))


def load_traffic(
    store: ReadableStore, where: str, since_ns: int | None = None, limit: int = TRAFFIC_LIMIT
) -> list[Trace]:
    """The stored traces with a span matching `where` (started at or after `since_ns`), at
    most `limit` of them, oldest first."""
    return load_traces(store, find_trace_ids(store, where, limit, since_ns))


@dataclass(frozen=True, slots=True)
class ReplayedTurn:
    """Where one dataset item of a `replay conversations` run sits: its conversation and
    its position in it."""

    conversation_id: str
    index: int


def replayed_turns(
    turns: Sequence[TurnRecord], items: Mapping[str, ReplayedTurn]
) -> list[TurnRecord]:
    """A `replay conversations` run's turns as EDGE turns: the scenario is the stored
    conversation, every repeat an exact replay of it, the turn its position (turns of
    items not in `items` are left out)."""
    records = [
        replace(
            turn,
            scenario_id=items[turn.scenario_id].conversation_id,
            variant_id=BASE_VARIANT,
            replay_index=turn.replay_index or 0,
            turn=items[turn.scenario_id].index,
        )
        for turn in turns
        if turn.scenario_id in items
    ]
    return sorted(records, key=lambda t: (t.conversation, t.attempt, t.turn, t.start_ns))


def replay_manifest(
    run_id: str,
    graph: AgentGraph,
    turns: Sequence[TurnRecord],
    stored_paths: Mapping[str, list[str]],
    intents: Mapping[str, str],
    agent: str = "",
) -> RunManifest:
    """The manifest of a `replay conversations` run (from `replayed_turns`): one scenario
    per stored conversation, its expected path the walk the stored conversation took (else,
    when that is unknown, the replays' most common walk), its intent the user's first turn."""
    conversations = _group(turns)
    walks: dict[str, list[list[str]]] = defaultdict(list)
    for (conversation, _, _), conversation_turns in conversations.items():
        walks[conversation].append(as_run(conversation_turns)["nodes"])
    scenarios = [
        Scenario(
            id=conversation,
            intent=intents.get(conversation, ""),
            expected_nodes=stored_paths.get(conversation) or most_common(map(tuple, runs)),
            expected_actions=[],
        )
        for conversation, runs in walks.items()
    ]
    repeats = max((len(runs) for runs in walks.values()), default=0)
    return RunManifest(
        run_id=run_id, graph=graph.to_dsl(), scenarios=scenarios, replays=repeats, variants=0,
        max_restarts=0, seed=0, agent=agent, user_simulator="stored conversations",
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """One dataset item a `replay conversations` run replayed: its id, its conversation,
    the stored trace it came from and the user's message."""

    item_id: str
    conversation_id: str
    source_trace_id: str = ""
    user_message: str = ""


def replay_run_metrics(
    store: Store,
    run_id: str,
    items: Sequence[StoredTurn],
    graph: AgentGraph | None = None,
    judge: ResponseConsistencyJudge | None = None,
    agent: str = "",
) -> dict[str, Any]:
    """EDGE metrics of a `replay conversations` run (post-production determinism, paper
    4.1): each stored conversation is a scenario, each repeat an exact replay of it.

    `items` are the run's dataset items in conversation order. The expected path of a
    conversation is the walk its stored traces show; the graph is `graph`, else the one
    the run's own traces imply (`traffic.infer_graph`). EdgeRunNotFound when the run has no
    turn of these items.
    """
    positions: dict[str, ReplayedTurn] = {}
    stored_paths: dict[str, list[str]] = defaultdict(list)
    intents: dict[str, str] = {}
    sources = {t.trace_id: t for t in load_traces(store, [i.source_trace_id for i in items])}
    turns_seen: Counter[str] = Counter()
    for item in items:
        positions[item.item_id] = ReplayedTurn(
            item.conversation_id, turns_seen[item.conversation_id]
        )
        turns_seen[item.conversation_id] += 1
        intents.setdefault(item.conversation_id, item.user_message)
        if item.source_trace_id in sources:
            walk = turn_walk(sources[item.source_trace_id])
            stored_paths[item.conversation_id] += [visit.node for visit in walk]
    turns = replayed_turns(load_turns(store, run_id), positions)
    if not turns:
        raise EdgeRunNotFound(f"run {run_id!r}: no replayed turn of its dataset in the store")
    if graph is None:
        ids = [trace_id for _, trace_id in run_trace_ids(store, run_id)]
        graph = load_graph(infer_graph(load_traces(store, ids)))
    manifest = replay_manifest(run_id, graph, turns, stored_paths, intents, agent)
    metrics = edge_metrics(manifest, turns, judge)
    metrics["manifest"] = manifest.model_dump(exclude={"graph", "scenarios"})
    metrics["graph"] = manifest.graph
    return metrics


def _group(turns: Sequence[TurnRecord]) -> dict[tuple[str, str, int | None], list[TurnRecord]]:
    """Turns by conversation (scenario, variant, replay), order kept."""
    grouped: dict[tuple[str, str, int | None], list[TurnRecord]] = defaultdict(list)
    for turn in turns:
        grouped[turn.conversation].append(turn)
    return grouped


def as_run(turns: Sequence[TurnRecord]) -> dict[str, Any]:
    """One conversation as a determinism run: all nodes and actions, the last response."""
    return {
        "nodes": [node for turn in turns for node in turn.nodes],
        "actions": [action for turn in turns for action in turn.actions],
        "response": turns[-1].response if turns else "",
    }


def utility_records(
    conversations: dict[tuple[str, str, int | None], list[TurnRecord]],
    expected: dict[str, list[str]],
) -> list[dict[str, Any]]:
    """node_utility records, one per conversation (a query is one conversation, EDGE
    Table 4): its attempts as walks and its agent turns. Each attempt that left its path
    records the first node off the path and the edge into it as failures."""
    records = []
    for key, turns in conversations.items():
        path = expected.get(key[0], [])
        attempts: dict[int, list[str]] = defaultdict(list)
        for turn in turns:
            attempts[turn.attempt] += turn.nodes
        failed_nodes, failed_edges = [], []
        for nodes in attempts.values():
            off = next(
                (i for i, node in enumerate(nodes) if i >= len(path) or path[i] != node), None
            )
            if off is not None:
                failed_nodes.append(nodes[off])
                if off:
                    failed_edges.append((nodes[off - 1], nodes[off]))
        records.append(
            {
                "walks": list(attempts.values()),
                "turns": len(turns),
                "failed_nodes": failed_nodes,
                "failed_edges": failed_edges,
            }
        )
    return records


def _mean_metrics(rows: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """Key-wise mean over scenarios (None values skipped; None when none is set)."""
    keys = dict.fromkeys(key for row in rows for key in row)
    means: dict[str, float | None] = {}
    for key in keys:
        values = [row[key] for row in rows if row.get(key) is not None]
        means[key] = fmean(values) if values else None
    return means


def edge_metrics(
    manifest: RunManifest,
    turns: Sequence[TurnRecord],
    judge: ResponseConsistencyJudge | None = None,
) -> dict[str, Any]:
    """All EDGE metrics of one run: per scenario, their means, structure and utility."""
    if not turns:
        raise EdgeRunNotFound(f"run {manifest.run_id!r}: no agent turns in the store")
    graph: AgentGraph = load_graph(manifest.graph)
    expected = {s.id: s.expected_nodes for s in manifest.scenarios}
    conversations = _group(turns)
    attempts: dict[tuple[Any, ...], list[TurnRecord]] = defaultdict(list)
    for turn in turns:
        attempts[(*turn.conversation, turn.attempt)].append(turn)
    per_scenario = []
    all_runs = []
    for scenario in manifest.scenarios:
        keys = [key for key in conversations if key[0] == scenario.id]
        base = [as_run(conversations[k]) for k in keys if k[1] == BASE_VARIANT]
        variants = [as_run(conversations[k]) for k in keys if k[1] != BASE_VARIANT]
        all_runs += [{**run, "expected_nodes": scenario.expected_nodes} for run in base + variants]
        if not base:
            continue
        row: dict[str, Any] = {"scenario": scenario.id, "path": scenario.expected_nodes}
        row["replay"] = replay_metrics(base)
        row["variant"] = variant_metrics(base, variants) if variants else {}
        if judge is not None:
            base_responses = [r["response"] for r in base]
            row["replay"]["response_consistency_judged"] = judge(scenario.intent, base_responses)
            if variants:
                row["variant"]["response_consistency_judged"] = judged_consistency(
                    judge(scenario.intent, [b, v["response"]])
                    for v in variants
                    for b in base_responses
                )
        per_scenario.append(row)
    return {
        "run_id": manifest.run_id,
        "counts": {
            "scenarios": len(per_scenario),
            "conversations": len(conversations),
            "attempts": len(attempts),
            "turns": len(turns),
        },
        "replay": _mean_metrics([row["replay"] for row in per_scenario]),
        "variant": _mean_metrics([row["variant"] for row in per_scenario if row["variant"]]),
        "scenarios": per_scenario,
        "structure": structural_adherence(graph, [as_run(a) for a in attempts.values()]),
        "convergence": convergence(graph, all_runs),
        "utility": node_utility(utility_records(conversations, expected), graph),
        "handoffs": handoff_counts(turn.handoffs for turn in turns),
    }


def run_metrics(
    store: ReadableStore, run_id: str, judge: ResponseConsistencyJudge | None = None
) -> dict[str, Any]:
    """Read run `run_id` from the store and compute `edge_metrics` (with its manifest)."""
    manifest = load_manifest(store, run_id)
    metrics = edge_metrics(manifest, load_turns(store, run_id), judge)
    metrics["manifest"] = manifest.model_dump(exclude={"graph", "scenarios"})
    metrics["graph"] = manifest.graph
    return metrics
