"""A 6-node recruitment agent driven by a SIMULATED, seeded stochastic router (no model).

THIS IS A SIMULATED POLICY, NOT AN LLM. It stands in for an LLM router so the EDGE
comparison runs offline and reproducibly:

- the router reads which node the user asks for (the node whose intent text occurs in the
  message), and follows it with probability FOLLOW_PROBABILITY when that transition is
  allowed; otherwise it picks uniformly among the allowed next nodes;
- `constrained` allows only the edges of graph_constrained.json; `baseline` allows every
  transition (graph_baseline.json). Both use the very same router and seeds.

Its random draws are seeded from the conversation state's `seed` (set by pathgrade's
simulation from `--seed`) and the turn number, so a run is reproducible.

Spans (OpenTelemetry GenAI conventions, through the global tracer provider): per user turn
one root `invoke_agent recruitment-agent` span, one `invoke_agent <node>` child per node
visited (gen_ai.agent.name = node id) and an `execute_tool <tool>` span under each node.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from opentelemetry import trace

HERE = Path(__file__).parent
AGENT_NAME = "recruitment-agent"
FOLLOW_PROBABILITY = 0.7
_REPLIES = {
    "topic_selector": ("Happy to help with your application.", "Welcome! Let's get started."),
    "job_inquiry": ("We have 3 open roles matching you.", "Three roles are open right now."),
    "general_inquiries": ("We are a 200-person company.", "Our team has about 200 people."),
    "screening": ("Here is the screening form.", "Please fill in the screening form."),
    "killer_questions": ("You meet the must-have criteria.", "Your answers pass the checks."),
    "finalize": ("Your interview is booked for Monday.", "Interview scheduled: Monday 10:00."),
}
tracer = trace.get_tracer("examples.recruitment")


def _load(name: str) -> dict[str, Any]:
    return json.loads((HERE / name).read_text())


class RecruitmentAgent:
    """The agent for one graph file: its nodes, tools and allowed transitions."""

    def __init__(self, graph_file: str) -> None:
        graph = _load(graph_file)
        self.start = graph["start"]
        self.terminals = set(graph["terminals"])
        self.intents = {node["id"]: node["intent"] for node in graph["nodes"]}
        self.tools = {node["id"]: node["tools"] for node in graph["nodes"]}
        self.allowed: dict[str, list[str]] = {node["id"]: [] for node in graph["nodes"]}
        for edge in graph["edges"]:
            self.allowed[edge["from"]].append(edge["to"])

    def wanted(self, message: str) -> str | None:
        """The node whose intent text the user's message contains (None if none does)."""
        text = message.lower()
        return next((node for node, intent in self.intents.items() if intent in text), None)

    def route(self, current: str, message: str, rng: random.Random) -> str:
        """SIMULATED router: follow the user's wish with FOLLOW_PROBABILITY, else random."""
        allowed = self.allowed[current]
        wanted = self.wanted(message)
        if wanted in allowed and rng.random() < FOLLOW_PROBABILITY:
            return wanted
        return rng.choice(allowed)

    def respond(self, state: dict[str, Any], message: str, context: Any = None) -> dict[str, Any]:
        """One user turn: visit the start node on the first turn, then route one step."""
        turn = int(state.get("turn", 0))
        rng = random.Random(f"{state.get('seed', 0)}:{turn}")
        current = state.get("current")
        path = [self.start] if current is None else []
        node = self.start if current is None else current
        if node not in self.terminals:
            node = self.route(node, message, rng)
            path.append(node)
        with tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}") as root:
            root.set_attributes(
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": AGENT_NAME,
                    "gen_ai.conversation.id": str(state.get("conversation_id", "")),
                    "gen_ai.input.messages": _messages("user", message),
                }
            )
            replies = [self._visit(step, message, rng) for step in path]
            answer = " ".join(replies)
            root.set_attribute("gen_ai.output.messages", _messages("assistant", answer))
        new_state = {**state, "turn": turn + 1, "current": node}
        return {
            "response": answer,
            "nodes": path,
            "done": node in self.terminals,
            "state": new_state,
        }

    def _visit(self, node: str, message: str, rng: random.Random) -> str:
        """The node's span, its tool call span, and its reply."""
        with tracer.start_as_current_span(f"invoke_agent {node}") as span:
            span.set_attributes(
                {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": node}
            )
            for tool in self.tools[node]:
                arguments = {"node": node, "topic": self.wanted(message) or "unknown"}
                with tracer.start_as_current_span(f"execute_tool {tool}") as call:
                    call.set_attributes(
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": tool,
                            "gen_ai.tool.type": "function",
                            "gen_ai.tool.call.arguments": json.dumps(arguments, sort_keys=True),
                            "gen_ai.tool.call.result": json.dumps({"ok": True}),
                        }
                    )
            return rng.choice(_REPLIES[node])


def _messages(role: str, text: str) -> str:
    """One GenAI message as the JSON array text of gen_ai.input/output.messages."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


constrained = RecruitmentAgent("graph_constrained.json")
baseline = RecruitmentAgent("graph_baseline.json")
