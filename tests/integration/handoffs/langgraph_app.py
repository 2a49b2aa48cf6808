"""LangGraph under OpenLLMetry (`opentelemetry-instrumentation-langchain`): a graph of two
agent nodes, triage and billing, each a model (`ChatOpenAI` pointed at the scripted model)
that calls the stories' tools and hands off with a `transfer_to_<agent>` tool, routed with
LangGraph's `Command(goto=...)` (the hand-off-tool pattern of LangGraph's multi-agent
guides). The session is switched when a node hands off. Runs in the test environment (its
packages are in the `test` extra), as its own process:

    python -m tests.integration.handoffs.langgraph_app --otlp URL --model-url URL \
        --service NAME --out FILE
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command
from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.handoffs.app import TOOLS, Session, main
from tests.integration.handoffs.stories import AGENTS, HANDOFF_PREFIX, Story, instructions

MAX_STEPS = 8


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def transfer_tool(target: str) -> BaseTool:
    """The tool an agent calls to hand the customer to `target`."""

    def transfer() -> str:
        return f"transferred to {target}"

    transfer.__name__ = HANDOFF_PREFIX + target
    transfer.__doc__ = f"Hand the customer over to the {target} agent."
    return tool(transfer)


def agent_node(name: str, session: Session, model_url: str) -> Callable[[State], Command]:
    """One agent: model calls and tool calls until it answers or hands off."""
    handoffs = [transfer_tool(agent) for agent in AGENTS if agent != name]
    tools = {t.name: t for t in [*map(tool, TOOLS), *handoffs]}
    model = ChatOpenAI(model="gpt-4o-mini", base_url=model_url, api_key="scripted")
    bound = model.bind_tools(list(tools.values()))

    def node(state: State) -> Command:
        new: list[Any] = []
        for _ in range(MAX_STEPS):
            reply = bound.invoke([SystemMessage(instructions(name)), *state["messages"], *new])
            new.append(reply)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                result = tools[call["name"]].invoke(call["args"])
                new.append(ToolMessage(content=str(result), tool_call_id=call["id"]))
                if call["name"].startswith(HANDOFF_PREFIX):
                    session.handed_off()
                    target = call["name"].removeprefix(HANDOFF_PREFIX)
                    return Command(goto=target, update={"messages": new})
        return Command(goto=END, update={"messages": new})

    return node


def run_story(story: Story, session: Session, model_url: str) -> str:
    graph = StateGraph(State)
    for name in AGENTS:
        graph.add_node(name, agent_node(name, session, model_url), destinations=(*AGENTS, END))
    graph.add_edge(START, "triage")
    app = graph.compile(name="support")
    result = app.invoke({"messages": [("user", story.user_text)]})
    return str(result["messages"][-1].content)


def instrument(provider: TracerProvider) -> None:
    LangchainInstrumentor().instrument(tracer_provider=provider)


if __name__ == "__main__":
    sys.exit(main(run_story, "LangGraph", instrument))
