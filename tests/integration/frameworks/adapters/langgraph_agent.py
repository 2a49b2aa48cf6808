"""A LangGraph agent (`langchain.agents.create_agent`, a compiled LangGraph graph) on
`ChatOpenAI` pointed at the scripted model: shared by the OpenInference and OpenLLMetry
rows, which differ only in the instrumentor."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS

DISTRIBUTIONS = ("langgraph", "langchain", "langchain-openai")


class Session:
    def __init__(self, model_url: str) -> None:
        model = ChatOpenAI(model="gpt-4o-mini", base_url=model_url, api_key="scripted")
        self.agent = create_agent(
            model, tools=[tool(t) for t in TOOLS], system_prompt=INSTRUCTIONS, name="support-agent"
        )
        self.messages: list[Any] = []

    def ask(self, text: str) -> str:
        state = self.agent.invoke({"messages": [*self.messages, HumanMessage(text)]})
        self.messages = state["messages"]
        return str(self.messages[-1].content)
