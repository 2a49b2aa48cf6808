"""Convention writers: one small attribute writer per tracing convention (GenAI,
OpenInference, OpenLLMetry) turns the same planned turn into span names and attributes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pathgrade.demo.options import Flavor
from pathgrade.demo.scenarios import (
    AGENT_ID,
    AGENT_NAME,
    PROVIDER,
    Attributes,
    ChatCall,
    Message,
    ToolCall,
    TurnPlan,
    compact_json,
)


class ConventionWriter(Protocol):
    """Turns planned spans into (span name, attributes) in one tracing convention."""

    def agent(self, turn: TurnPlan) -> tuple[str, Attributes]: ...
    def chat(self, turn: TurnPlan, chat: ChatCall) -> tuple[str, Attributes]: ...
    def tool(self, turn: TurnPlan, call: ToolCall) -> tuple[str, Attributes]: ...


class GenAIWriter:
    """OpenTelemetry GenAI semantic conventions (gen_ai.*)."""

    def agent(self, turn: TurnPlan) -> tuple[str, Attributes]:
        return f"invoke_agent {AGENT_NAME}", {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": AGENT_NAME,
            "gen_ai.agent.id": AGENT_ID,
            "gen_ai.conversation.id": turn.conversation_id,
            "enduser.id": turn.customer_id,
        }

    def chat(self, turn: TurnPlan, chat: ChatCall) -> tuple[str, Attributes]:
        return f"chat {chat.request_model}", {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": chat.request_model,
            "gen_ai.response.model": chat.response_model,
            "gen_ai.usage.input_tokens": chat.input_tokens,
            "gen_ai.usage.output_tokens": chat.output_tokens,
            "gen_ai.response.finish_reasons": [chat.finish_reason],
            "gen_ai.input.messages": chat.input_messages_json,
            "gen_ai.output.messages": chat.output_messages_json,
        }

    def tool(self, turn: TurnPlan, call: ToolCall) -> tuple[str, Attributes]:
        return f"execute_tool {call.tool}", {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": call.tool,
            "gen_ai.tool.call.id": call.call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": call.arguments_json,
            "gen_ai.tool.call.result": call.result_json,
        }


@dataclass(frozen=True, slots=True)
class FlatMessage:
    """A GenAI message flattened the way OpenInference and OpenLLMetry index messages."""

    role: str
    content: str = ""
    tool_call_id: str = ""  # on role "tool": the call this result answers
    tool_calls: tuple[tuple[str, str, str], ...] = ()  # (id, name, arguments JSON)


def flatten(message: Message) -> FlatMessage:
    """Text parts joined; tool_call parts as (id, name, arguments); a tool response as content."""
    texts: list[str] = []
    calls: list[tuple[str, str, str]] = []
    answered = ""
    for part in message["parts"]:
        if part["type"] == "text":
            texts.append(part["content"])
        elif part["type"] == "tool_call":
            calls.append((part["id"], part["name"], compact_json(part["arguments"])))
        elif part["type"] == "tool_call_response":
            answered = part["id"]
            texts.append(compact_json(part["response"]))
    return FlatMessage(message["role"], "".join(texts), answered, tuple(calls))


class OpenInferenceWriter:
    """Arize OpenInference conventions (openinference.span.kind, llm.*, tool.*)."""

    def agent(self, turn: TurnPlan) -> tuple[str, Attributes]:
        return AGENT_NAME, {
            "openinference.span.kind": "AGENT",
            "agent.name": AGENT_NAME,
            "session.id": turn.conversation_id,
            "user.id": turn.customer_id,
            "input.value": turn.user_text,
            "output.value": turn.answer,
        }

    def chat(self, turn: TurnPlan, chat: ChatCall) -> tuple[str, Attributes]:
        attributes: Attributes = {
            "openinference.span.kind": "LLM",
            "llm.model_name": chat.response_model,
            "llm.request.model_name": chat.request_model,
            "llm.response.model_name": chat.response_model,
            "llm.provider": PROVIDER,
            "llm.system": PROVIDER,
            "llm.token_count.prompt": chat.input_tokens,
            "llm.token_count.completion": chat.output_tokens,
            "llm.token_count.total": chat.input_tokens + chat.output_tokens,
            "llm.finish_reason": chat.finish_reason,
        }
        inputs = [flatten(m) for m in chat.input_messages]
        output = flatten(chat.output_message)
        for index, message in enumerate(inputs):
            attributes |= self._message(f"llm.input_messages.{index}.", message)
        attributes |= self._message("llm.output_messages.0.", output)
        attributes["input.value"] = inputs[-1].content
        attributes["output.value"] = output.content or compact_json(
            [{"id": i, "name": n, "arguments": a} for i, n, a in output.tool_calls]
        )
        return "ChatCompletion", attributes

    def tool(self, turn: TurnPlan, call: ToolCall) -> tuple[str, Attributes]:
        return call.tool, {
            "openinference.span.kind": "TOOL",
            "tool.name": call.tool,
            "tool.id": call.call_id,
            "input.value": call.arguments_json,
            "input.mime_type": "application/json",
            "output.value": call.result_json,
            "output.mime_type": "application/json",
        }

    @staticmethod
    def _message(prefix: str, message: FlatMessage) -> Attributes:
        attributes: Attributes = {f"{prefix}message.role": message.role}
        if message.content:
            attributes[f"{prefix}message.content"] = message.content
        if message.tool_call_id:
            attributes[f"{prefix}message.tool_call_id"] = message.tool_call_id
        for index, (call_id, name, arguments) in enumerate(message.tool_calls):
            call = f"{prefix}message.tool_calls.{index}.tool_call."
            attributes[f"{call}id"] = call_id
            attributes[f"{call}function.name"] = name
            attributes[f"{call}function.arguments"] = arguments
        return attributes


class OpenLLMetryWriter:
    """Traceloop OpenLLMetry conventions (traceloop.*, gen_ai.prompt/completion.N.*)."""

    def agent(self, turn: TurnPlan) -> tuple[str, Attributes]:
        return f"{AGENT_NAME}.agent", {
            "traceloop.span.kind": "agent",
            "traceloop.entity.name": AGENT_NAME,
            "traceloop.workflow.name": AGENT_NAME,
            "traceloop.entity.input": compact_json({"args": [turn.user_text], "kwargs": {}}),
            "traceloop.entity.output": compact_json(turn.answer),
            "traceloop.association.properties.session_id": turn.conversation_id,
            "traceloop.association.properties.user_id": turn.customer_id,
        }

    def chat(self, turn: TurnPlan, chat: ChatCall) -> tuple[str, Attributes]:
        attributes: Attributes = {
            "llm.request.type": "chat",
            "gen_ai.system": PROVIDER,
            "gen_ai.request.model": chat.request_model,
            "gen_ai.response.model": chat.response_model,
            "gen_ai.usage.prompt_tokens": chat.input_tokens,
            "gen_ai.usage.completion_tokens": chat.output_tokens,
            "llm.usage.total_tokens": chat.input_tokens + chat.output_tokens,
            "traceloop.workflow.name": AGENT_NAME,
        }
        for index, message in enumerate(chat.input_messages):
            attributes |= self._message(f"gen_ai.prompt.{index}.", flatten(message))
        attributes |= self._message("gen_ai.completion.0.", flatten(chat.output_message))
        attributes["gen_ai.completion.0.finish_reason"] = chat.finish_reason
        return f"{PROVIDER}.chat", attributes

    def tool(self, turn: TurnPlan, call: ToolCall) -> tuple[str, Attributes]:
        return f"{call.tool}.tool", {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": call.tool,
            "traceloop.workflow.name": AGENT_NAME,
            "traceloop.entity.input": compact_json({"args": [], "kwargs": call.arguments}),
            "traceloop.entity.output": call.result_json,
        }

    @staticmethod
    def _message(prefix: str, message: FlatMessage) -> Attributes:
        attributes: Attributes = {f"{prefix}role": message.role}
        if message.content:
            attributes[f"{prefix}content"] = message.content
        if message.tool_call_id:
            attributes[f"{prefix}tool_call_id"] = message.tool_call_id
        for index, (call_id, name, arguments) in enumerate(message.tool_calls):
            attributes[f"{prefix}tool_calls.{index}.id"] = call_id
            attributes[f"{prefix}tool_calls.{index}.name"] = name
            attributes[f"{prefix}tool_calls.{index}.arguments"] = arguments
        return attributes


WRITERS: dict[Flavor, ConventionWriter] = {
    "genai": GenAIWriter(),
    "openinference": OpenInferenceWriter(),
    "openllmetry": OpenLLMetryWriter(),
}


def writer_for(flavor: str) -> ConventionWriter:
    """The attribute writer of a flavor; ValueError names the accepted flavors."""
    try:
        return WRITERS[flavor]
    except KeyError:
        raise ValueError(f"flavor {flavor!r} is unknown; use one of {sorted(WRITERS)}") from None
