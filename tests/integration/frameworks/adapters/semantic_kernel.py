"""Semantic Kernel with its own OpenTelemetry tracing (GenAI conventions; turned on, with
content, by its two documented environment variables): a `ChatCompletionAgent` on
`OpenAIChatCompletion` with an `AsyncOpenAI` client pointed at the scripted model, the
tools in one plugin (`support`), so the model calls them as `support-<tool>`."""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS", "true")
os.environ.setdefault("SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE", "true")

from openai import AsyncOpenAI
from opentelemetry.sdk.trace import TracerProvider
from semantic_kernel.agents import ChatCompletionAgent, ChatHistoryAgentThread
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from semantic_kernel.functions import KernelPlugin, kernel_function

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    """Nothing more to do: Semantic Kernel traces to the global tracer provider."""


class Session:
    def __init__(self, model_url: str) -> None:
        client = AsyncOpenAI(base_url=model_url, api_key="scripted")
        service = OpenAIChatCompletion(ai_model_id="gpt-4o-mini", async_client=client)
        plugin = KernelPlugin.from_object(
            "support", {t.__name__: kernel_function(t) for t in TOOLS}
        )
        self.agent = ChatCompletionAgent(
            service=service, name="support_agent", instructions=INSTRUCTIONS, plugins=[plugin]
        )
        self.thread: ChatHistoryAgentThread | None = None
        self.loop = asyncio.new_event_loop()

    def ask(self, text: str) -> str:
        response = self.loop.run_until_complete(self.agent.get_response(text, thread=self.thread))
        self.thread = response.thread
        return str(response.content)


FRAMEWORK = Framework(
    name="Semantic Kernel",
    distributions=("semantic-kernel",),
    instrumentation="own (OpenTelemetry GenAI conventions, "
    "`SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS[_SENSITIVE]`)",
    instrument=instrument,
    session=Session,
    notes=("tools are named `plugin-function` (`support-change_plan`)",),
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
