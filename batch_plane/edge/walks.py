"""The walk of one turn through an agent graph, as EDGE reads it (runs, replays and live
traffic alike).

- A turn with LangGraph node spans walks its nodes (`content.graph_walk.node_visits`, the
  reading PG118 does).
- Else a turn where control passes from agent to agent (a `transfer` hand-off:
  `content.handoffs`; the OpenAI Agents SDK's handoffs, sequential agents) walks the agents
  control passed through (`HandoffFlow.agent_path`): a visit per run of the first agent and
  of each hand-off's receiver, with the tools that run called (hand-off calls and spans
  left out: they are the edges). So the graph EDGE infers and draws has the agents for
  nodes and the hand-offs for edges.
- Else the GenAI sub-agent spans (`node_visits`): an agent that delegates to sub-agents
  is the graph they are the nodes of, as EDGE has always read it.
"""

from __future__ import annotations

from pathgrade.content.conventions import handoff_tool_names
from pathgrade.content.graph_walk import NodeVisit, langgraph_node, node_visits
from pathgrade.content.handoffs import AgentRun, handoff_flow
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace


def turn_walk(trace: Trace) -> list[NodeVisit]:
    """The turn's walk (see the module doc), in order."""
    if any(langgraph_node(span) for span in trace.spans):
        return node_visits(trace)
    flow = handoff_flow(trace)
    if not any(h.kind == "transfer" for h in flow.handoffs):
        return node_visits(trace)
    runs = [flow.sender(flow.handoffs[0]), *(flow.receiver(h) for h in flow.handoffs)]
    carriers = {h.call.span_id for h in flow.handoffs if h.call is not None}
    return [_visit(run, carriers) for run in runs]


def _visit(run: AgentRun, carriers: set[str]) -> NodeVisit:
    """One run of an agent as a visit of its node, with the tools it called but the calls
    and spans of its hand-offs (`carriers`, handoff spans)."""
    tools = tuple(
        span.genai.tool_name or span.name
        for span in run.spans
        if span.genai.operation == genai.OP_EXECUTE_TOOL
        and span.span_id not in carriers
        and not handoff_tool_names(span.name)
    )
    return NodeVisit(run.agent, run.span.span_id, run.start_ns, tools)
