"""CrewAI under OpenInference (`openinference-instrumentation-crewai` for the crew, its
agents and tools; `openinference-instrumentation-openai` for the model calls): one agent,
one task per user turn, on CrewAI's `LLM` pointed at the scripted model. CrewAI's own
anonymous telemetry to its servers is turned off."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool
from openinference.instrumentation.crewai import CrewAIInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    CrewAIInstrumentor().instrument(tracer_provider=provider)
    OpenAIInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        llm = LLM(model="openai/gpt-4o-mini", base_url=model_url, api_key="scripted")
        self.agent = Agent(
            role="support agent",
            goal=INSTRUCTIONS,
            backstory=INSTRUCTIONS,
            llm=llm,
            tools=[tool(t.__name__)(t) for t in TOOLS],
            verbose=False,
        )

    def ask(self, text: str) -> str:
        task = Task(
            description=text, expected_output="The answer to the customer.", agent=self.agent
        )
        return str(Crew(agents=[self.agent], tasks=[task], verbose=False).kickoff())


FRAMEWORK = Framework(
    name="CrewAI",
    distributions=(
        "crewai",
        "openinference-instrumentation-crewai",
        "openinference-instrumentation-openai",
    ),
    instrumentation="OpenInference `CrewAIInstrumentor` and `OpenAIInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
