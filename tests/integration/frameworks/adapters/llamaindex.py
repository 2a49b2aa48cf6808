"""LlamaIndex under OpenInference (`openinference-instrumentation-llama-index`): a
workflow `FunctionAgent` on LlamaIndex's `OpenAI` LLM pointed at the scripted model
(streamed), its memory kept in the workflow's `Context`."""

from __future__ import annotations

import asyncio
import sys

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.workflow import Context
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main


def instrument(provider: TracerProvider) -> None:
    LlamaIndexInstrumentor().instrument(tracer_provider=provider)


class Session:
    def __init__(self, model_url: str) -> None:
        llm = OpenAI(model="gpt-4o-mini", api_base=model_url, api_key="scripted")
        self.agent = FunctionAgent(
            name="support_agent", tools=list(TOOLS), llm=llm, system_prompt=INSTRUCTIONS
        )
        self.context = Context(self.agent)
        self.loop = asyncio.new_event_loop()

    def ask(self, text: str) -> str:
        async def run() -> str:
            return str(await self.agent.run(text, ctx=self.context))

        return self.loop.run_until_complete(run())


FRAMEWORK = Framework(
    name="LlamaIndex",
    distributions=(
        "llama-index-core",
        "llama-index-llms-openai",
        "openinference-instrumentation-llama-index",
    ),
    instrumentation="OpenInference `LlamaIndexInstrumentor`",
    instrument=instrument,
    session=Session,
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
