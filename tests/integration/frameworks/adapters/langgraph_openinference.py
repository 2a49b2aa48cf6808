"""LangGraph under OpenInference (`openinference-instrumentation-langchain`). The
instrumentor makes no span current while a tool runs: application code reaches the span of
the current LangChain run through the instrumentation's `get_current_span()`."""

from __future__ import annotations

import sys

from openinference.instrumentation.langchain import LangChainInstrumentor, get_current_span
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
    current_span=get_current_span,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
