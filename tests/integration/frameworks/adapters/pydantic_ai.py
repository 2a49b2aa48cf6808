"""Pydantic AI with its own OpenTelemetry GenAI instrumentation (`Agent.instrument_all`),
on an OpenAI-compatible chat model pointed at the scripted model."""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))


class Session:
    def __init__(self, model_url: str) -> None:
        model = OpenAIChatModel(
            "gpt-4o-mini", provider=OpenAIProvider(base_url=model_url, api_key="scripted")
        )
        self.agent = Agent(model, name="support-agent", instructions=INSTRUCTIONS, tools=TOOLS)
        self.history: list[Any] = []

    def ask(self, text: str) -> str:
        result = self.agent.run_sync(text, message_history=self.history)
        self.history = result.all_messages()
        return str(result.output)


FRAMEWORK = Framework(
    name="Pydantic AI",
    distributions=("pydantic-ai-slim",),
    instrumentation="own (OpenTelemetry GenAI conventions, `Agent.instrument_all`)",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
