"""AutoGen AgentChat under OpenInference (`openinference-instrumentation-autogen-agentchat`)
beside its own tracing (autogen-core's GenAI `invoke_agent` / `execute_tool` spans on the
global tracer provider, which carry neither arguments nor answers): an `AssistantAgent` on
`OpenAIChatCompletionClient` pointed at the scripted model."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Awaitable, Callable

from autogen_agentchat.agents import AssistantAgent
from autogen_ext.models.openai import OpenAIChatCompletionClient
from openinference.instrumentation.autogen_agentchat import AutogenAgentChatInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main

MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "family": "gpt-4o",
    "structured_output": False,
}


def in_task(tool: Callable[..., str]) -> Callable[..., Awaitable[str]]:
    """`tool` as a coroutine: AutoGen runs a synchronous tool in a worker thread without the
    caller's OpenTelemetry context (`run_in_executor`), where the app's approval gate would
    find no span to record its decision on; a coroutine runs in the agent's task, inside
    the tool's span."""

    @functools.wraps(tool)
    async def run(*args: object, **kwargs: object) -> str:
        return tool(*args, **kwargs)

    return run


def instrument(provider: TracerProvider) -> None:
    AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        client = OpenAIChatCompletionClient(
            model="gpt-4o-mini", base_url=model_url, api_key="scripted", model_info=MODEL_INFO
        )
        self.agent = AssistantAgent(
            "support_agent",
            model_client=client,
            tools=[in_task(t) for t in TOOLS],
            system_message=INSTRUCTIONS,
            max_tool_iterations=10,
        )
        self.loop = asyncio.new_event_loop()

    def ask(self, text: str) -> str:
        result = self.loop.run_until_complete(self.agent.run(task=text))
        return str(result.messages[-1].content)


FRAMEWORK = Framework(
    name="AutoGen AgentChat",
    distributions=(
        "autogen-agentchat",
        "autogen-ext",
        "openinference-instrumentation-autogen-agentchat",
    ),
    instrumentation="own (autogen-core GenAI spans) and OpenInference "
    "`AutogenAgentChatInstrumentor`",
    instrument=instrument,
    session=Session,
    notes=(
        "the app's tools are coroutines: AutoGen runs a synchronous tool in a worker "
        "thread without the OpenTelemetry context, so an approval gate inside it has no "
        "span to record its decision on",
    ),
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
