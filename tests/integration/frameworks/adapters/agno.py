"""Agno under OpenInference (`openinference-instrumentation-agno`): an `Agent` on
`OpenAIChat` pointed at the scripted model, its history in Agno's in-memory database."""

from __future__ import annotations

import secrets
import sys

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.openai import OpenAIChat
from openinference.instrumentation.agno import AgnoInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    AgnoInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        model = OpenAIChat(id="gpt-4o-mini", base_url=model_url, api_key="scripted")
        self.agent = Agent(
            model=model,
            name="support-agent",
            instructions=INSTRUCTIONS,
            tools=list(TOOLS),
            db=InMemoryDb(),
            add_history_to_context=True,
            session_id=secrets.token_hex(8),
            telemetry=False,
        )

    def ask(self, text: str) -> str:
        return str(self.agent.run(text).content)


FRAMEWORK = Framework(
    name="Agno",
    distributions=("agno", "openinference-instrumentation-agno"),
    instrumentation="OpenInference `AgnoInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
