"""The OpenAI Agents SDK under OpenInference (`openinference-instrumentation-openai-agents`):
a triage agent that hands off to a billing agent holding the tools, both on the SDK's
chat-completions model pointed at the scripted model. The SDK's own tracing goes to
OpenAI's backend (skipped here: no API key); OpenInference turns it into OTel spans."""

from __future__ import annotations

import sys
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        client = AsyncOpenAI(base_url=model_url, api_key="scripted")
        model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
        billing = Agent(
            name="billing",
            instructions=INSTRUCTIONS,
            model=model,
            tools=[function_tool(t) for t in TOOLS],
        )
        self.agent = Agent(
            name="triage",
            instructions="Hand the customer to billing.",
            model=model,
            handoffs=[billing],
        )
        self.history: list[Any] = []

    def ask(self, text: str) -> str:
        result = Runner.run_sync(self.agent, [*self.history, {"role": "user", "content": text}])
        self.history = result.to_input_list()
        return str(result.final_output)


FRAMEWORK = Framework(
    name="OpenAI Agents SDK",
    distributions=("openai-agents", "openinference-instrumentation-openai-agents"),
    instrumentation="OpenInference `OpenAIAgentsInstrumentor`",
    instrument=instrument,
    session=Session,
    notes=("a triage agent hands off to a billing agent (`transfer_to_billing`)",),
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
