"""LangGraph under OpenLLMetry (`opentelemetry-instrumentation-langchain`)."""

from __future__ import annotations

import sys

from opentelemetry.instrumentation.langchain import LangchainInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.adapters.langgraph_agent import DISTRIBUTIONS, Session
from tests.integration.frameworks.app import Framework, main


def instrument(provider: TracerProvider) -> None:
    LangchainInstrumentor().instrument(tracer_provider=provider)


FRAMEWORK = Framework(
    name="LangGraph (OpenLLMetry)",
    distributions=(*DISTRIBUTIONS, "opentelemetry-instrumentation-langchain"),
    instrumentation="OpenLLMetry `LangchainInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
