"""EDGE determinism metrics: how repeatably an agent walks its graph.

Pure functions over plain lists and dicts (rows read from ClickHouse fit as they are):
no I/O. Inputs are checked with pydantic, so a bad record gets an error naming its index
and field. Formulas and decisions: docs/edge.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import pairwise
from statistics import fmean
from typing import Any, TypeVar

from pathgrade.batch_plane.scoring.similarity import (
    jaccard,
    lexical_similarity,
    mean_pairwise,
)
from pathgrade.schemas.agent_graph import AgentGraph
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    field_validator,
    model_validator,
)

T = TypeVar("T", bound=Hashable)
Edge = tuple[str, str]


class Action(BaseModel):
    """One tool call of a run: its name and arguments (an object, or its JSON text)."""

    model_config = ConfigDict(extra="allow")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("args", mode="before")
    @classmethod
    def _decode_json_text(cls, value: Any) -> Any:
        """Accept JSON text such as the store's `tool_arguments` column ("" means no args)."""
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value) if value.strip() else {}
        except json.JSONDecodeError as error:
            raise ValueError(f"not valid JSON text: {error.msg}") from error


class Run(BaseModel):
    """One run of a scenario: the nodes visited, the actions taken, the final response."""

    model_config = ConfigDict(extra="allow")

    nodes: list[str]
    actions: list[Action] = Field(default_factory=list)
    response: str = ""


class PathRun(Run):
    """A run that set out to follow one enumerated graph path (`expected_nodes`)."""

    expected_nodes: list[str] = Field(min_length=1)


class Conversation(BaseModel):
    """One conversation: its walks through the graph (one per attempt of a simulation, one
    per turn of a LangGraph agent; `nodes` is shorthand for a single walk), its number of
    user turns and the failures recorded in it."""

    model_config = ConfigDict(extra="allow")

    walks: list[list[str]]
    turns: int | None = Field(default=None, ge=0)  # None: one turn per walk
    failed_nodes: list[str] = Field(default_factory=list)
    failed_edges: list[tuple[str, str]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_walk(cls, value: Any) -> Any:
        """`{"nodes": [...]}` is one walk."""
        if isinstance(value, dict) and "walks" not in value and "nodes" in value:
            return {**value, "walks": [value["nodes"]]}
        return value

    @property
    def user_turns(self) -> int:
        return len(self.walks) if self.turns is None else self.turns


def _parse(model: type[BaseModel], records: Sequence[Any], name: str) -> list[Any]:
    """Validate `records` as a non-empty list of `model` (errors name `name[index].field`)."""
    if len(records) == 0:
        raise ValueError(f"{name}: at least one record is required")
    return TypeAdapter(list[model]).validate_python(records)


def canonical_action(action: Action) -> str:
    """`name(args)` with the args as canonical JSON (sorted keys), so dict order never matters."""
    args = json.dumps(
        action.args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return f"{action.name}({args})"


# The three trajectory views of a run, keyed by their metric-name prefix.
TRAJECTORY_VIEWS: dict[str, Callable[[Run], tuple[str, ...]]] = {
    "node": lambda run: tuple(run.nodes),
    "action": lambda run: tuple(action.name for action in run.actions),
    "action_input": lambda run: tuple(canonical_action(action) for action in run.actions),
}


def most_common(items: Sequence[T]) -> T:
    """The most frequent item; ties go to the item seen first."""
    return Counter(items).most_common(1)[0][0]


def consistency(sequences: Sequence[T]) -> float:
    """Share of sequences equal to the most common one."""
    return Counter(sequences).most_common(1)[0][1] / len(sequences)


def _set_jaccard(left: Iterable[str], right: Iterable[str]) -> float:
    """Jaccard similarity of the sets of two sequences."""
    return jaccard(set(left), set(right))


def replay_metrics(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Determinism of exact replays of one scenario (seven metrics in [0, 1])."""
    parsed: list[Run] = _parse(Run, runs, "runs")
    metrics: dict[str, float] = {}
    for view, trajectory in TRAJECTORY_VIEWS.items():
        sequences = [trajectory(run) for run in parsed]
        metrics[f"{view}_trajectory_consistency"] = consistency(sequences)
        metrics[f"{view}_trajectory_coverage"] = mean_pairwise(sequences, _set_jaccard)
    responses = [run.response for run in parsed]
    metrics["response_consistency_lexical"] = mean_pairwise(responses, lexical_similarity)
    return metrics


def variant_metrics(
    base_runs: Sequence[dict[str, Any]], variant_runs: Sequence[dict[str, Any]]
) -> dict[str, float]:
    """Determinism of variant runs (the same task reworded) against the exact replays (EDGE
    Table 2): the base's canonical run and the variants are scored as one group.

    Canonical trajectory c: the replays' most common one. Consistency: share of the group
    (c and every variant) whose trajectory equals c, (1 + matching variants) / (1 + V).
    Coverage: mean pairwise Jaccard of the group's sets. Response: mean lexical similarity
    over all (variant, replay) pairs. See docs/edge.md for why this reproduces Table 2.
    """
    base: list[Run] = _parse(Run, base_runs, "base_runs")
    variants: list[Run] = _parse(Run, variant_runs, "variant_runs")
    metrics: dict[str, float] = {}
    for view, trajectory in TRAJECTORY_VIEWS.items():
        canonical = most_common([trajectory(run) for run in base])
        group = [canonical, *(trajectory(run) for run in variants)]
        metrics[f"{view}_trajectory_consistency"] = fmean(s == canonical for s in group)
        metrics[f"{view}_trajectory_coverage"] = mean_pairwise(group, _set_jaccard)
    metrics["response_consistency_lexical"] = fmean(
        lexical_similarity(v.response, b.response) for v in variants for b in base
    )
    return metrics


def judged_consistency(grades: Iterable[float | None]) -> float | None:
    """The mean of a judge's 1-4 grades, undecided ones left out (None when none decided):
    Table 1's replays get one grade; Table 2 grades every (variant, replay) pair."""
    decided = [grade for grade in grades if grade is not None]
    return fmean(decided) if decided else None


def _transitions(nodes: Sequence[str]) -> list[Edge]:
    """Consecutive node pairs of a node sequence."""
    return list(pairwise(nodes))


def _edge_rows(counts: Counter[Edge], key: str) -> list[dict[str, Any]]:
    """Edge counts as `{"from", "to", key}` rows, most frequent first."""
    return [
        {"from": source, "to": target, key: count}
        for (source, target), count in sorted(counts.items(), key=lambda i: (-i[1], i[0]))
    ]


def structural_adherence(graph: AgentGraph, runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Share of observed node transitions (over all runs) that are edges of the graph.

    `structural_adherence` is None when the runs hold no transition at all (nothing to
    judge: a gate on it fails closed). Off-graph transitions are listed with their counts.
    """
    parsed: list[Run] = _parse(Run, runs, "runs")
    edges = graph.edge_pairs()
    observed = Counter(pair for run in parsed for pair in _transitions(run.nodes))
    total = sum(observed.values())
    off_graph = Counter({pair: n for pair, n in observed.items() if pair not in edges})
    return {
        "structural_adherence": (total - off_graph.total()) / total if total else None,
        "transitions": total,
        "off_graph_transitions": _edge_rows(off_graph, "count"),
    }


def converged(nodes: Sequence[str], expected: Sequence[str]) -> bool:
    """CCR's test: the conversation followed its path exactly (no detour, no restart)."""
    return list(nodes) == list(expected)


def completed(nodes: Sequence[str], expected: Sequence[str]) -> bool:
    """PCR's test: the path occurs in order within the conversation (restarts allowed)."""
    remaining = iter(nodes)
    return all(node in remaining for node in expected)


def convergence(graph: AgentGraph, scenario_runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Conversation convergence and path completion over runs that each target one path.

    Each record is a run plus `expected_nodes`. Converged: the run's node sequence equals
    the expected path (no detour, backtrack or restart). Completed: the expected path occurs
    in order within the run's sequence (detours and restarts allowed). Also lists the graph
    nodes and edges no run reached.
    """
    parsed: list[PathRun] = _parse(PathRun, scenario_runs, "scenario_runs")
    visited = {node for run in parsed for node in run.nodes}
    traversed = {pair for run in parsed for pair in _transitions(run.nodes)}
    return {
        "paths": len(parsed),
        "convergence_rate": fmean(converged(r.nodes, r.expected_nodes) for r in parsed),
        "completion_rate": fmean(completed(r.nodes, r.expected_nodes) for r in parsed),
        "unreached_nodes": [node.id for node in graph.nodes if node.id not in visited],
        "unreached_edges": [
            {"from": source, "to": target}
            for source, target in dict.fromkeys((e.source, e.target) for e in graph.edges)
            if (source, target) not in traversed
        ],
    }


def _utilities(queries: Counter[Any], conversations: int) -> dict[Any, float]:
    """queries / the number of conversations (EDGE Table 4)."""
    return {key: count / conversations for key, count in queries.items()}


def node_utility(
    conversations: Sequence[dict[str, Any]], graph: AgentGraph | None = None
) -> dict[str, Any]:
    """Per-node and per-edge usage over conversations (EDGE node/edge utility, Table 4).

    queries: conversations that visited the node (used the edge); visits (traversals): every
    pass; utility: queries / conversations; failures: from the records' `failed_nodes` /
    `failed_edges`. With a graph, its unused nodes and edges appear with zeros. Transitions
    are counted within a walk only.
    """
    parsed: list[Conversation] = _parse(Conversation, conversations, "conversations")
    node_queries: Counter[str] = Counter()
    node_visits: Counter[str] = Counter()
    edge_queries: Counter[Edge] = Counter()
    edge_traversals: Counter[Edge] = Counter()
    for conversation in parsed:
        steps = [step for walk in conversation.walks for step in _transitions(walk)]
        nodes = [node for walk in conversation.walks for node in walk]
        node_queries.update(set(nodes))
        node_visits.update(nodes)
        edge_queries.update(set(steps))
        edge_traversals.update(steps)
    node_failures = Counter(node for c in parsed for node in c.failed_nodes)
    edge_failures = Counter(tuple(edge) for c in parsed for edge in c.failed_edges)
    if graph is not None:
        node_queries.update(dict.fromkeys((node.id for node in graph.nodes), 0))
        edge_queries.update(dict.fromkeys(graph.edge_pairs(), 0))
    node_queries.update(dict.fromkeys(node_failures, 0))
    edge_queries.update(dict.fromkeys(edge_failures, 0))
    node_utilities = _utilities(node_queries, len(parsed))
    edge_utilities = _utilities(edge_queries, len(parsed))
    turns = sum(c.user_turns for c in parsed)
    return {
        "conversations": len(parsed),
        "turns": turns,
        "avg_turns_per_conversation": turns / len(parsed),
        "avg_node_transitions_per_turn": edge_traversals.total() / turns if turns else 0.0,
        "nodes": [
            {
                "node": node,
                "queries": node_queries[node],
                "visits": node_visits[node],
                "utility": node_utilities[node],
                "failures": node_failures[node],
            }
            for node in sorted(node_queries, key=lambda n: (-node_queries[n], n))
        ],
        "edges": [
            {
                "from": edge[0],
                "to": edge[1],
                "queries": edge_queries[edge],
                "traversals": edge_traversals[edge],
                "utility": edge_utilities[edge],
                "failures": edge_failures[edge],
            }
            for edge in sorted(edge_queries, key=lambda e: (-edge_queries[e], e))
        ],
    }
