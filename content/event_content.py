"""Content a span carries in GenAI span events (the conventions' earlier event form:
`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
`gen_ai.tool.message`, `gen_ai.choice`; Strands Agents writes them), as the GenAI
attributes that hold it today, so facts and detectors read it like any other content.

A message event's body is its `content` attribute (a choice's: `message`): plain text, or
JSON content blocks in the Bedrock Converse shape Strands uses (`{"text"}`,
`{"toolUse": {"toolUseId", "name", "input"}}`, `{"toolResult": {"toolUseId", "content"}}`),
which become the conventions' parts (`text`, `tool_call`, `tool_call_response`).

- a model call (`chat`, ...) or an agent span: the message events before the choice are
  `gen_ai.input.messages`, the choices `gen_ai.output.messages`;
- a tool span: its `gen_ai.tool.message` holds the call's arguments
  (`gen_ai.tool.call.arguments`), its choice the result (`gen_ai.tool.call.result`).

Attributes a span sets itself win over what its events say.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from pathgrade.schemas import genai
from pathgrade.schemas.json_text import parse_json

ROLES: Final = {
    genai.EVENT_SYSTEM_MESSAGE: "system",
    genai.EVENT_USER_MESSAGE: "user",
    genai.EVENT_ASSISTANT_MESSAGE: "assistant",
    genai.EVENT_TOOL_MESSAGE: "tool",
}
"""The role of each input message event."""
MESSAGE_EVENTS: Final = frozenset({*ROLES, genai.EVENT_CHOICE})
_READ_BY: Final = genai.MODEL_OPERATIONS | {genai.OP_INVOKE_AGENT, genai.OP_EXECUTE_TOOL}
"""The operations whose events are read (a framework's own loop spans repeat them)."""


def has_message_events(names: Iterable[str]) -> bool:
    """Whether any of the event `names` is a message event."""
    return any(name in MESSAGE_EVENTS for name in names)


def event_content(
    operation: str, events: Iterable[tuple[str, Mapping[str, Any]]]
) -> dict[str, str]:
    """The GenAI content attributes the message `events` (name, attributes) of a span
    whose operation is `operation` hold; {} when none."""
    if operation not in _READ_BY:
        return {}
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for name, attributes in events:
        if name == genai.EVENT_CHOICE:
            outputs.append(_message("assistant", attributes.get("message")))
        elif name in ROLES:
            inputs.append(_message(ROLES[name], attributes.get("content")))
    if not inputs and not outputs:
        return {}
    if operation == genai.OP_EXECUTE_TOOL:
        found = {}
        if inputs:
            found[genai.TOOL_CALL_ARGUMENTS] = _plain(inputs[-1])
        if outputs:
            found[genai.TOOL_CALL_RESULT] = _plain(outputs[-1])
        return found
    found = {}
    if inputs:
        found[genai.INPUT_MESSAGES] = json.dumps(inputs)
    if outputs:
        found[genai.OUTPUT_MESSAGES] = json.dumps(outputs)
    return found


def _message(role: str, body: Any) -> dict[str, Any]:
    """A conventions message of `role` from an event's body."""
    return {"role": role, "parts": _parts(body)}


def _parts(body: Any) -> list[dict[str, Any]]:
    """The parts of an event body: plain text, or JSON content blocks."""
    if not isinstance(body, str):
        return [] if body is None else [{"type": "text", "content": str(body)}]
    blocks = parse_json(body)
    if isinstance(blocks, dict):
        blocks = [blocks]
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        return [{"type": "text", "content": body}]
    parts = [_part(block) for block in blocks]
    known = [p for p in parts if p is not None]
    return known if known else [{"type": "text", "content": body}]


def _part(block: dict[str, Any]) -> dict[str, Any] | None:
    """One content block as a conventions part; None for a block of another kind."""
    if isinstance(block.get("text"), str):
        return {"type": "text", "content": block["text"]}
    use = block.get("toolUse")
    if isinstance(use, dict):
        return {"type": "tool_call", "id": str(use.get("toolUseId") or ""),
                "name": str(use.get("name") or ""), "arguments": use.get("input")}  # fmt: skip
    result = block.get("toolResult")
    if isinstance(result, dict):
        texts = [_part(b) for b in result.get("content") or [] if isinstance(b, dict)]
        response = "\n".join(str(t["content"]) for t in texts if t and t["type"] == "text")
        return {"type": "tool_call_response", "id": str(result.get("toolUseId") or ""),
                "response": response}  # fmt: skip
    if block.get("role") and "content" in block:  # already a message (role, content)
        return {"type": "text", "content": str(block["content"])}
    return None


def _plain(message: dict[str, Any]) -> str:
    """A tool message's body as the tool attribute holds it: its text (JSON arguments or a
    result), the parts' texts joined."""
    texts = [str(p.get("content") or p.get("response") or "") for p in message["parts"]]
    return "\n".join(texts)
