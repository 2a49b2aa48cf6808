"""smolagents under OpenInference (`openinference-instrumentation-smolagents`): a
`ToolCallingAgent` on `OpenAIServerModel` pointed at the scripted model; the final answer
is the `final_answer` tool's call, as smolagents asks for it."""

from __future__ import annotations

import sys

from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from tests.integration.frameworks.app import TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    SmolagentsInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        model = OpenAIServerModel("gpt-4o-mini", api_base=model_url, api_key="scripted")
        self.agent = ToolCallingAgent(
            tools=[tool(t) for t in TOOLS], model=model, name="support_agent", verbosity_level=0
        )
        self.first = True

    def ask(self, text: str) -> str:
        answer = self.agent.run(text, reset=self.first)
        self.first = False
        return str(answer)


FRAMEWORK = Framework(
    name="smolagents",
    distributions=("smolagents", "openinference-instrumentation-smolagents"),
    instrumentation="OpenInference `SmolagentsInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
