"""Reading GenAI message JSON (`gen_ai.input.messages` / `gen_ai.output.messages`).

Accepts the semantic-convention shape (`{"role", "parts": [{"type": "text", "content"},
{"type": "tool_call", "id", "name", "arguments"}]}`) and the OpenAI chat shape
(`{"role", "content", "tool_calls": [{"id", "function": {"name", "arguments"}}]}`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestedToolCall:
    """A tool call a model asked for in its output messages."""

    call_id: str
    name: str


def parse_json(text: str) -> Any:
    """`text` parsed as JSON, or None when empty or not JSON."""
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_messages(text: str) -> list[dict[str, Any]]:
    """The message objects in `text` (a JSON list, or one object); [] when not captured."""
    value = parse_json(text)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [m for m in value if isinstance(m, dict)]


def message_text(message: dict[str, Any]) -> str:
    """The concatenated text content of one message."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else []
    for part in _parts(message):
        if part.get("type") == "text":
            texts.append(str(part.get("content") or ""))
        elif part.get("type") == "tool_call_response":
            texts.append(str(part.get("response") or part.get("content") or ""))
    return "\n".join(texts)


def message_tool_calls(message: dict[str, Any]) -> list[RequestedToolCall]:
    """The tool calls a message requests, in order."""
    calls = [
        RequestedToolCall(str(p.get("id") or ""), str(p.get("name") or ""))
        for p in _parts(message)
        if p.get("type") == "tool_call"
    ]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append(RequestedToolCall(str(call.get("id") or ""), str(function.get("name"))))
    return calls


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
