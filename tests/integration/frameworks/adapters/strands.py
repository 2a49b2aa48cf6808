"""Strands Agents with its own OpenTelemetry tracing (GenAI conventions, on the global
tracer provider), on its OpenAI model provider pointed at the scripted model (streamed)."""

from __future__ import annotations

import sys

from opentelemetry.sdk.trace import TracerProvider
from strands import Agent, tool
from strands.models.openai import OpenAIModel

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    """Nothing to do: Strands traces to the global tracer provider the app set."""


class Session:
    def __init__(self, model_url: str) -> None:
        model = OpenAIModel(
            client_args={"base_url": model_url, "api_key": "scripted"}, model_id="gpt-4o-mini"
        )
        self.agent = Agent(
            model=model,
            name="support-agent",
            system_prompt=INSTRUCTIONS,
            tools=[tool(t) for t in TOOLS],
            callback_handler=None,
        )

    def ask(self, text: str) -> str:
        return str(self.agent(text))


FRAMEWORK = Framework(
    name="Strands Agents",
    distributions=("strands-agents",),
    instrumentation="own (OpenTelemetry GenAI conventions, global tracer provider)",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
