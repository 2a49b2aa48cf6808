"""Normalise tool calls and chat messages into one shape for the trajectory scorers.

Accepted tool-call forms: pathgrade's plain dict ``{"name", "args", "output", "type"}``
(``args``, ``output`` and ``type`` optional), an OpenAI ``tool_calls`` entry
``{"id", "type": "function", "function": {"name", "arguments": JSON string}}``, a LangChain
tool-call dict ``{"name", "args", "id", "type": "tool_call"}`` and a :class:`ToolCall`.
Accepted messages: OpenAI-style dicts (``role``, ``content``, ``tool_calls``) and LangChain
message objects (only when ``langchain_core`` is installed; imported lazily).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TOOL_TYPE = "function"
# LangChain marks its tool-call dicts with type "tool_call": that names the dict, not the tool.
_DICT_MARKER_TYPES = {"tool_call": DEFAULT_TOOL_TYPE}
# LangChain message types and OpenAI roles mean the same speakers.
_ROLE_ALIASES = {"human": "user", "ai": "assistant"}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation: tool name, decoded arguments, optional output and tool type."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    type: str = DEFAULT_TOOL_TYPE


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message reduced to what trajectory matching reads: role and tool calls."""

    role: str
    tool_calls: tuple[ToolCall, ...] = ()


def normalize_tool_call(raw: Any, where: str) -> ToolCall:
    """Turn any accepted tool-call form into a :class:`ToolCall`; ``where`` names it in errors."""
    if isinstance(raw, ToolCall):
        return raw
    if not _is_mapping(raw):
        raise TypeError(f"{where}: expected a tool-call dict, got {type(raw).__name__}")
    if "function" in raw:
        return _openai_tool_call(raw, where)
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.name: must be a non-empty string, got {name!r}")
    args = raw.get("args")
    if args is None:
        args = {}
    elif not _is_mapping(args):
        raise ValueError(f"{where}.args: must be a dict, got {type(args).__name__}")
    tool_type = raw.get("type", DEFAULT_TOOL_TYPE)
    if not isinstance(tool_type, str):
        raise ValueError(f"{where}.type: must be a string, got {type(tool_type).__name__}")
    return ToolCall(
        name=name,
        args=dict(args),
        output=raw.get("output"),
        type=_DICT_MARKER_TYPES.get(tool_type, tool_type),
    )


def _openai_tool_call(raw: Mapping[str, Any], where: str) -> ToolCall:
    """Decode an OpenAI ``tool_calls`` entry (arguments are a JSON object string)."""
    function = raw["function"]
    if not _is_mapping(function):
        raise ValueError(f"{where}.function: must be a dict, got {type(function).__name__}")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.function.name: must be a non-empty string, got {name!r}")
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where}.function.arguments: not valid JSON ({error})") from None
    if not _is_mapping(arguments):
        raise ValueError(f"{where}.function.arguments: must decode to a JSON object")
    return ToolCall(name=name, args=dict(arguments), output=raw.get("output"))


def _is_mapping(value: Any) -> bool:
    """``isinstance(value, Mapping)``, answering plain dicts without the slow abstract check."""
    return type(value) is dict or isinstance(value, Mapping)


def _is_sequence(value: Any) -> bool:
    """A list, tuple or other non-string ``Sequence`` (plain lists answered first)."""
    if type(value) is list:
        return True
    return not isinstance(value, str | bytes) and isinstance(value, Sequence)


def normalize_tool_calls(raw: Any, where: str) -> list[ToolCall]:
    """Normalise a list of tool calls; ``where`` names the argument in errors.

    Already normalised :class:`ToolCall` items are kept as they are, so metrics sharing one
    normalised trajectory pay only a type check per call.
    """
    if raw is None:
        return []
    if not _is_sequence(raw):
        raise TypeError(f"{where}: expected a list of tool calls, got {type(raw).__name__}")
    try:
        return [
            item if isinstance(item, ToolCall) else normalize_tool_call(item, where) for item in raw
        ]
    except (TypeError, ValueError):
        pass  # normalise again below, naming each item so the error says which one
    return [normalize_tool_call(item, f"{where}[{index}]") for index, item in enumerate(raw)]


def normalize_messages(raw: Any, where: str) -> list[Message]:
    """Normalise a message list (or a ``{"messages": [...]}`` dict) into :class:`Message`s."""
    if _is_mapping(raw):
        if "messages" not in raw:
            raise ValueError(f"{where}: a dict must hold the message list under 'messages'")
        raw = raw["messages"]
        where = f"{where}.messages"
    if not _is_sequence(raw):
        raise TypeError(f"{where}: expected a list of messages, got {type(raw).__name__}")
    return [_normalize_message(item, f"{where}[{index}]") for index, item in enumerate(raw)]


def _normalize_message(raw: Any, where: str) -> Message:
    """Normalise one OpenAI-style dict or LangChain message object."""
    if _is_mapping(raw):
        role = raw.get("role")
        if not isinstance(role, str) or not role:
            raise ValueError(f"{where}.role: must be a non-empty string, got {role!r}")
        calls = normalize_tool_calls(raw.get("tool_calls"), f"{where}.tool_calls")
        return Message(role=_ROLE_ALIASES.get(role, role), tool_calls=tuple(calls))
    if _is_langchain_message(raw):
        role = raw.role if raw.type == "chat" else raw.type
        calls = normalize_tool_calls(getattr(raw, "tool_calls", None), f"{where}.tool_calls")
        return Message(role=_ROLE_ALIASES.get(role, role), tool_calls=tuple(calls))
    raise TypeError(
        f"{where}: expected a message dict or a LangChain message, got {type(raw).__name__}"
    )


def _is_langchain_message(value: Any) -> bool:
    """True when ``value`` is a LangChain message (False when langchain_core is absent)."""
    try:
        from langchain_core.messages import BaseMessage
    except ImportError:
        return False
    return isinstance(value, BaseMessage)
