"""The OpenAI Agents SDK under OpenInference (`openinference-instrumentation-openai-agents`):
a triage agent and a billing agent that can hand off to each other (the SDK's
`transfer_to_<agent>` tools), both with the stories' tools, on the SDK's chat-completions
model pointed at the scripted model. The identity switch runs in the SDK's `on_handoff`
run hook, in the run's own context. Runs in the SDK's cached venv
(tests/integration/frameworks/environments.py, `openai-agents`):

    python -m tests.integration.handoffs.openai_agents_app --otlp URL --model-url URL \
        --service NAME --out FILE
"""

from __future__ import annotations

import sys
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, RunHooks, Runner, function_tool
from openai import AsyncOpenAI
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.handoffs.app import TOOLS, Session, main
from tests.integration.handoffs.stories import Story, instructions


class Hooks(RunHooks[Any]):
    """Tells the app when control passes to another agent."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        self.session.handed_off()


def run_story(story: Story, session: Session, model_url: str) -> str:
    client = AsyncOpenAI(base_url=model_url, api_key="scripted")
    model = OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)
    tools = [function_tool(t) for t in TOOLS]
    triage = Agent(name="triage", instructions=instructions("triage"), model=model, tools=tools)
    billing = Agent(name="billing", instructions=instructions("billing"), model=model, tools=tools)
    triage.handoffs, billing.handoffs = [billing], [triage]
    result = Runner.run_sync(triage, story.user_text, hooks=Hooks(session), max_turns=12)
    return str(result.final_output)


def instrument(provider: TracerProvider) -> None:
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


if __name__ == "__main__":
    sys.exit(main(run_story, "OpenAI Agents SDK", instrument))
