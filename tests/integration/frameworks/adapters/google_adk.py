"""Google ADK with its own OpenTelemetry tracing (`invoke_agent`, `call_llm`,
`execute_tool` spans with GenAI attributes, on the global tracer provider): an `LlmAgent`
run by ADK's in-memory runner. ADK talks to models through its `BaseLlm` classes (Gemini,
or LiteLLM for others), so the scripted model is a `BaseLlm` here that answers from the
same script as the OpenAI-compatible stand-in (stories.step_for_messages)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator
from typing import Any

# The OpenTelemetry GenAI opt-ins ADK reads: the latest conventions, content on the spans.
os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.frameworks.app import INSTRUCTIONS, TOOLS, Framework, main
from tests.integration.frameworks.stories import CUSTOMER, step_for_messages


def instrument(provider: TracerProvider) -> None:
    """Nothing to do: ADK traces to the global tracer provider the app set."""


def messages_of(contents: list[types.Content]) -> list[dict[str, Any]]:
    """ADK's contents as chat-completions messages (what the script reads)."""
    messages: list[dict[str, Any]] = []
    for content in contents:
        for part in content.parts or []:
            if part.text:
                role = "assistant" if content.role == "model" else "user"
                messages.append({"role": role, "content": part.text})
            elif part.function_call:
                messages.append({"role": "assistant", "tool_calls": [{"function": {}}]})
            elif part.function_response:
                messages.append({"role": "tool", "content": ""})
    return messages


class ScriptedLlm(BaseLlm):
    """The stories' scripted model as an ADK model."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        step = step_for_messages(messages_of(llm_request.contents), set(llm_request.tools_dict))
        if step is None or step.call is None:
            text = step.story.answer if step else "I can only help with your account."
            part = types.Part(text=text)
        else:
            part = types.Part(
                function_call=types.FunctionCall(
                    id=step.call_id, name=step.call.tool, args=step.call.arguments
                )
            )
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=120, candidates_token_count=30, total_token_count=150
        )
        yield LlmResponse(
            content=types.Content(role="model", parts=[part]),
            usage_metadata=usage,
            finish_reason=types.FinishReason.STOP,
        )


class Session:
    def __init__(self, model_url: str) -> None:
        agent = LlmAgent(
            name="support_agent",
            model=ScriptedLlm(model="scripted-gemini"),
            instruction=INSTRUCTIONS,
            tools=list(TOOLS),
        )
        self.runner = InMemoryRunner(agent=agent, app_name="support")
        self.session = self.runner.session_service.create_session_sync(
            app_name="support", user_id=CUSTOMER
        )

    def ask(self, text: str) -> str:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        answer = ""
        for event in self.runner.run(
            user_id=CUSTOMER, session_id=self.session.id, new_message=message
        ):
            parts = event.content.parts if event.content else []
            answer = next((p.text for p in parts or [] if p.text), answer)
        return answer


FRAMEWORK = Framework(
    name="Google ADK",
    distributions=("google-adk",),
    instrumentation="own (OpenTelemetry GenAI conventions: `OTEL_SEMCONV_STABILITY_OPT_IN`"
    " and `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`)",
    instrument=instrument,
    session=Session,
    notes=(
        "the scripted model is an ADK `BaseLlm` (ADK reaches other models through "
        "LiteLLM, not an OpenAI base URL)",
    ),
)

if __name__ == "__main__":
    sys.exit(main(FRAMEWORK))
