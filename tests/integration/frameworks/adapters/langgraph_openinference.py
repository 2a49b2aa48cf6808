"""LangGraph under OpenInference (`openinference-instrumentation-langchain`)."""

from __future__ import annotations

import sys

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.adapters.langgraph_agent import DISTRIBUTIONS, Session
from tests.integration.frameworks.app import Framework, main


def instrument(provider: TracerProvider) -> None:
    LangChainInstrumentor().instrument(tracer_provider=provider)


FRAMEWORK = Framework(
    name="LangGraph (OpenInference)",
    distributions=(*DISTRIBUTIONS, "openinference-instrumentation-langchain"),
    instrumentation="OpenInference `LangChainInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
