"""A 4-node car-dealer agent built with LangGraph, on a chat model that needs no network.

Nodes: greetings (the entry) routes to test_drive, warranty or faq, or ends the turn.
The routing decision is a call to `RouterChatModel`, a LangChain chat model that is
SIMULATED, not an LLM: it answers with the route whose intent text the user's message
contains. With `follow_probability=1.0` it is scripted (always that route); below 1.0 it is
a seeded stochastic policy that sometimes picks another route, seeded from the conversation
state's `seed` (set by pathgrade's simulation) and the turn number.

Instrumentation (OpenTelemetry GenAI conventions, via the global tracer provider): per user
turn a root `invoke_agent car-dealer-agent` span; per LangGraph node an `invoke_agent <node>`
span with gen_ai.agent.name = node id; a `chat <model>` span for the routing call (zero
tokens: it is simulated); an `execute_tool <tool>` span per tool. Agents for `pathgrade edge
run --agent`: `examples/car_dealer/agent.py:scripted` and `examples/car_dealer/agent.py:stochastic`.
`python examples/car_dealer/agent.py graph.json` writes the LangGraph JSON of the graph.
"""

from __future__ import annotations

import json
import operator
import random
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from opentelemetry import trace

AGENT_NAME = "car-dealer-agent"
MODEL_NAME = "simulated-router"
NODES: dict[str, dict[str, Any]] = {  # node -> LangGraph node metadata (tools, intent)
    "greetings": {"tools": [], "intent": "say hello"},
    "test_drive": {"tools": ["check_availability", "book_test_drive"],
                   "intent": "book a test drive"},
    "warranty": {"tools": ["lookup_warranty"], "intent": "ask about the warranty"},
    "faq": {"tools": ["search_faq"], "intent": "ask a frequently asked question"},
}  # fmt: skip
ROUTES = ["test_drive", "warranty", "faq"]
_REPLIES = {
    "greetings": ("Welcome to Sunny Motors!", "Hi, thanks for visiting Sunny Motors."),
    "test_drive": ("Your test drive is booked for Saturday.", "Saturday 11:00 is yours."),
    "warranty": ("New cars carry a 5-year warranty.", "The warranty runs for five years."),
    "faq": ("We are open 9 to 6 on weekdays.", "Opening hours: weekdays 9-18."),
}
tracer = trace.get_tracer("examples.car_dealer")


class RouterChatModel(BaseChatModel):
    """SIMULATED chat model: names the route whose intent the last human message contains,
    with probability `follow_probability`; otherwise a seeded random route (or END)."""

    follow_probability: float = 1.0
    seed: str = "0"

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        text = str(messages[-1].content).lower()
        wanted = next((r for r in ROUTES if NODES[r]["intent"] in text), END)
        rng = random.Random(self.seed)
        if rng.random() >= self.follow_probability:
            wanted = rng.choice([*ROUTES, END])
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=wanted))])


class DealerState(TypedDict, total=False):
    message: str
    seed: str
    route: str
    visited: Annotated[list[str], operator.add]
    replies: Annotated[list[str], operator.add]


def _node_span(node: str, state: DealerState) -> dict[str, Any]:
    """Run one node inside its span: its tools, then its reply."""
    rng = random.Random(f"{state['seed']}:{node}")
    with tracer.start_as_current_span(f"invoke_agent {node}") as span:
        span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": node})
        for tool in NODES[node]["tools"]:
            with tracer.start_as_current_span(f"execute_tool {tool}") as call:
                call.set_attributes({
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": json.dumps({"dealer": "sunny-motors"}),
                })  # fmt: skip
        return {"visited": [node], "replies": [rng.choice(_REPLIES[node])]}


def build_graph(follow_probability: float) -> Any:
    """The compiled LangGraph agent; the router model uses `follow_probability`."""

    def greetings(state: DealerState) -> dict[str, Any]:
        update = _node_span("greetings", state)
        model = RouterChatModel(follow_probability=follow_probability, seed=state["seed"])
        with tracer.start_as_current_span(f"chat {MODEL_NAME}") as chat:
            # a simulated router, not an LLM: it reads no tokens and writes none
            chat.set_attributes({"gen_ai.operation.name": "chat",
                                 "gen_ai.request.model": MODEL_NAME,
                                 "gen_ai.usage.input_tokens": 0,
                                 "gen_ai.usage.output_tokens": 0})  # fmt: skip
            route = str(model.invoke([SystemMessage("Pick a route."),
                                      HumanMessage(state["message"])]).content)  # fmt: skip
        return {**update, "route": route}

    builder = StateGraph(DealerState)
    builder.add_node("greetings", greetings, metadata=NODES["greetings"])
    for route in ROUTES:
        builder.add_node(route, lambda state, node=route: _node_span(node, state),
                         metadata=NODES[route])  # fmt: skip
        builder.add_edge(route, END)
    builder.add_edge(START, "greetings")
    builder.add_conditional_edges(
        "greetings", lambda state: state["route"], {r: r for r in [*ROUTES, END]}
    )
    return builder.compile()


class CarDealerAgent:
    """The pathgrade adapter function: one LangGraph run per user turn, under a root span."""

    def __init__(self, follow_probability: float) -> None:
        self.graph = build_graph(follow_probability)

    def respond(self, state: dict[str, Any], message: str, context: Any = None) -> dict[str, Any]:
        turn = int(state.get("turn", 0))
        with tracer.start_as_current_span(f"invoke_agent {AGENT_NAME}") as root:
            root.set_attributes({
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.conversation.id": str(state.get("conversation_id", "")),
            })  # fmt: skip
            out = self.graph.invoke({"message": message, "seed": f"{state.get('seed', 0)}:{turn}"})
            answer = " ".join(out["replies"])
            message = {"role": "assistant", "parts": [{"type": "text", "content": answer}]}
            root.set_attribute("gen_ai.output.messages", json.dumps([message]))
        return {"response": answer, "nodes": out["visited"], "done": True,
                "state": {**state, "turn": turn + 1}}  # fmt: skip


def export_graph(path: str) -> None:
    """Write the LangGraph JSON (`get_graph().to_json()`) that `pathgrade edge` reads."""
    data = build_graph(1.0).get_graph().to_json()
    with open(path, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1, default=str)
        out.write("\n")


scripted = CarDealerAgent(follow_probability=1.0)
stochastic = CarDealerAgent(follow_probability=0.75)

if __name__ == "__main__":
    export_graph(sys.argv[1] if len(sys.argv) > 1 else "graph.json")
