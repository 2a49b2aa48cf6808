"""Structural adherence to a declared agent graph: PG118 off-graph-path.

The policy names the graph per service (or agent) under `agent_graph`; the turn's walk is
read from its node spans (`content.graph_walk`, every supported instrumentation).
`walk_problems` is the pure check, shared with the batch plane's EDGE traffic report.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pathgrade.content.graph_documents import parse_graph_document
from pathgrade.content.graph_walk import NodeVisit
from pathgrade.detectors.finding import Finding
from pathgrade.detectors.policy import POLICY_DIR_CONTEXT
from pathgrade.detectors.registry import Params, Rule, RuleDoc
from pathgrade.detectors.view import DetectorContext, TraceView
from pathgrade.schemas.agent_graph import AgentGraph, GraphError
from pydantic import Field, ValidationError, ValidationInfo, field_validator

Walk = Literal["turn", "conversation"]


@dataclass(frozen=True, slots=True)
class WalkProblem:
    """One way a walk leaves the graph: `problem` is `unknown_node`, `missing_edge`,
    `wrong_start` or `non_terminal_end`; `index` is the visit it concerns."""

    problem: str
    index: int
    source: str
    target: str

    def describe(self, graph: AgentGraph) -> str:
        """One sentence for an alert."""
        if self.problem == "unknown_node":
            return f"Node {self.target!r} is not in the declared graph."
        if self.problem == "missing_edge":
            return f"Edge {self.source!r} -> {self.target!r} is not in the declared graph."
        if self.problem == "wrong_start":
            return f"The turn starts at {self.target!r}; the graph starts at {graph.start!r}."
        return (
            f"The turn ends at {self.target!r}, not at a terminal "
            f"({', '.join(repr(t) for t in graph.terminals)})."
        )


def walk_problems(graph: AgentGraph, nodes: list[str], walk: Walk = "turn") -> list[WalkProblem]:
    """Every way the node sequence `nodes` leaves `graph`, in walk order.

    `walk="turn"`: the walk is one whole run of the graph (a LangGraph invocation per turn),
    so it must begin at the start and end on a terminal. `walk="conversation"`: the turn
    continues a walk begun in earlier turns, so neither its first node nor its last is
    checked against the start and the terminals; only its nodes and the edges inside it.
    """
    known = {node.id for node in graph.nodes}
    edges = graph.edge_pairs()
    problems = []
    if nodes and walk == "turn" and nodes[0] != graph.start and nodes[0] in known:
        problems.append(WalkProblem("wrong_start", 0, "", nodes[0]))
    for index, node in enumerate(nodes):
        if node not in known:
            problems.append(WalkProblem("unknown_node", index, "", node))
        elif index and nodes[index - 1] in known and (nodes[index - 1], node) not in edges:
            problems.append(WalkProblem("missing_edge", index, nodes[index - 1], node))
    if nodes and walk == "turn" and nodes[-1] in known and nodes[-1] not in graph.terminals:
        problems.append(WalkProblem("non_terminal_end", len(nodes) - 1, "", nodes[-1]))
    return problems


def read_graph_file(path: Path) -> AgentGraph:
    """The graph in a JSON file (EDGE DSL or LangGraph JSON); ValueError naming the file."""
    try:
        return parse_graph_document(json.loads(path.read_text(encoding="utf-8")))
    except OSError as error:
        raise ValueError(f"graph file {str(path)!r}: cannot read: {error.strerror}") from error
    except json.JSONDecodeError as error:
        raise ValueError(f"graph file {str(path)!r}: not JSON: {error.msg}") from error
    except (GraphError, ValidationError) as error:
        raise ValueError(f"graph file {str(path)!r}: {error}") from error


class GraphAdherenceParams(Params):
    """The declared graph (a JSON file, relative to the policy file, or the graph inline)
    and how a turn walks it."""

    graph: AgentGraph | None = Field(
        None,
        description=(
            "The declared graph, a JSON file path relative to the policy file or the "
            "graph inline; either the EDGE DSL (docs/edge.md) or LangGraph's "
            "`get_graph().to_json()` (what `pathgrade edge infer` writes is the DSL). "
            "Read and validated when the policy loads: a missing file or an unsound "
            "graph is a policy error naming the line."
        ),
    )
    walk: Walk = Field(
        "turn",
        description=(
            "`turn` when each turn is one whole run of the graph (a LangGraph invocation per "
            "user turn): the walk must begin at `start` and end on a terminal. `conversation` "
            "when a turn continues the walk of earlier turns (one node per user turn, like "
            "`examples/recruitment`): the turn's nodes, the edges inside it, and the step from "
            "the last node of the latest earlier turn that showed one (read from that turn's "
            "digest, `graph_nodes`, as PG106 and PG111 read earlier turns) into this turn's "
            "first node; neither the start (an earlier turn may be missing from the bounded "
            "history) nor the end (the conversation may go on) is checked."
        ),
    )

    @field_validator("graph", mode="before")
    @classmethod
    def _read_graph(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None or isinstance(value, AgentGraph):
            return value
        if isinstance(value, str):
            base = (info.context or {}).get(POLICY_DIR_CONTEXT) or Path.cwd()
            return read_graph_file(Path(base) / value)
        try:
            return parse_graph_document(value)
        except (GraphError, ValidationError) as error:
            raise ValueError(str(error)) from error


_NODE_SPAN_TABLE = "\n".join([
    "| instrumentation | node span | node |",
    "|---|---|---|",
    "| OpenLLMetry (`opentelemetry-instrumentation-langchain`) | "
    "`traceloop.association.properties.langgraph_node` equal to the span's `gen_ai.task.name` "
    "(else `traceloop.entity.name`) | that name |",
    "| OpenInference (`openinference-instrumentation-langchain`) | `metadata` JSON whose "
    "`langgraph_node` equals the span name | the span name |",
    "| GenAI conventions | an `invoke_agent` span below the turn's top whose "
    "`gen_ai.agent.name` differs from the top's | the agent name |",
])  # fmt: skip
NODE_SPANS = f"""\
How the walk is read (`content/graph_walk.py`; the first convention that finds a node in
the trace wins):

{_NODE_SPAN_TABLE}

Steps nested in a node (its chat model, its routing function, a subgraph's own nodes) are
part of that node's visit, not visits of their own. Each finding sits on the span of the
node concerned and carries `problem` (`unknown_node`, `missing_edge`, `wrong_start`,
`non_terminal_end`), `node`, `from` (missing edges) and the turn's whole `path`.

```yaml
services:
  car-dealer:
    agent_graph: {{graph: graphs/car-dealer.json}}          # one LangGraph run per turn
  recruitment:
    agent_graph: {{graph: graphs/recruitment.json, walk: conversation}}
```"""
"""The catalogue's notes on PG118: how each instrumentation's node spans are read."""


GRAPH_ADHERENCE = Rule(
    code="PG118",
    layer="plan",
    name="off-graph-path",
    severity="high",
    doc=RuleDoc(
        finds=(
            "A turn whose path through the agent graph leaves the graph the policy "
            "declares for this service: a node the graph lacks, an edge it lacks, a turn "
            "that does not begin at the start, or one that ends on a non-terminal node "
            "(the last two only when each turn walks the whole graph, `walk: turn`; with "
            "`walk: conversation` the step from the earlier turn's last node into this "
            "turn is checked too). "
            "Nodes are read from LangGraph's node spans (OpenLLMetry, OpenInference) or "
            "GenAI sub-agent spans. Quiet when no graph is declared."
        ),
        why=(
            "A graph agent that takes an edge its designers never drew is outside every "
            "path they tested."
        ),
        undecided="Cannot decide when the turn shows no node span.",
        fires=("The graph has `start -> triage -> answer` and the turn walks `start -> answer`."),
        quiet="The turn walks `start -> triage -> answer`.",
        capture_off="node names from span attributes (never content).",
        capture_on="the same.",
        notes=NODE_SPANS,
    ),
    params=GraphAdherenceParams,
    policy_key="agent_graph",
    reads="LangGraph node spans (traceloop langgraph_node, OpenInference metadata), "
    "invoke_agent spans below the turn's top: agent name",
)


@GRAPH_ADHERENCE.check
def off_graph_path(
    view: TraceView, params: GraphAdherenceParams, context: DetectorContext
) -> list[Finding]:
    """Each way the turn's walk leaves the declared graph."""
    graph = params.graph
    if graph is None:
        return []
    visits = view.node_visits
    if not visits:
        return [
            GRAPH_ADHERENCE.cannot_decide(
                view, "node_spans", "The turn shows no graph node span to check the path."
            )
        ]
    path = [visit.node for visit in visits]
    before = _previous_node(context) if params.walk == "conversation" else None
    if before is None:
        problems = walk_problems(graph, path, params.walk)
    else:  # the step from the earlier turn's last node into this turn is checked too
        problems = [
            dataclasses.replace(problem, index=problem.index - 1)
            for problem in walk_problems(graph, [before, *path], params.walk)
            if problem.index > 0
        ]
    return [_finding(view, graph, problem, visits, path) for problem in problems]


def _previous_node(context: DetectorContext) -> str | None:
    """The last graph node of the latest earlier turn of the conversation that shows one."""
    for digest in reversed(context.history):
        if digest.graph_nodes:
            return digest.graph_nodes[-1]
    return None


def _finding(
    view: TraceView,
    graph: AgentGraph,
    problem: WalkProblem,
    visits: list[NodeVisit],
    path: list[str],
) -> Finding:
    details: dict[str, Any] = {"problem": problem.problem, "node": problem.target, "path": path}
    identifying: tuple[str, ...] = ("problem", "node")
    if problem.problem == "missing_edge":
        details["from"] = problem.source
        identifying = ("problem", "from", "node")
    return GRAPH_ADHERENCE.violation(
        view, problem.describe(graph), visits[problem.index].span_id, details, identifying
    )
