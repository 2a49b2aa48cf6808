"""Reading GenAI message JSON (`gen_ai.input.messages` / `gen_ai.output.messages`): one
reader for the collector (facts) and the detectors.

Accepts the semantic-convention shape (`{"role", "parts": [{"type": "text", "content"},
{"type": "tool_call", "id", "name", "arguments"}]}`) and the OpenAI chat shape
(`{"role", "content", "tool_calls": [{"id", "function": {"name", "arguments"}}]}`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, NamedTuple, TypeVar

from pathgrade.schemas.genai_mapping import FINAL_ANSWER_TOOLS, FINAL_ANSWERS
from pathgrade.schemas.json_text import parse_json

T = TypeVar("T")


class RequestedToolCall(NamedTuple):
    """A tool call a model asked for in its output messages (a named tuple: one is made
    per call of every model output the collector reads, at less than a frozen
    dataclass's cost)."""

    call_id: str
    name: str
    arguments: Any = None
    """As the message holds them (JSON text, an object, or None when absent;
    `predicates.requested_arguments` reads them)."""
    argument_fps: dict[str, str] | None = None
    """Argument name -> fingerprint of its value, as the collector recorded them
    (`pathgrade.facts.output`) when the arguments were not captured."""


def parse_messages(text: str) -> list[dict[str, Any]]:
    """The message objects in `text` (a JSON list, or one object); [] when not captured."""
    value = parse_json(text)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return []
    return [m for m in value if isinstance(m, dict)]


NAMED_PART_TYPES = frozenset({
    "text", "tool_call", "tool_call_response", "server_tool_call", "server_tool_call_response",
    "blob", "file", "uri", "reasoning", "compaction",
})  # fmt: skip
"""The message part types the conventions name (gen-ai-input-messages.json and
gen-ai-output-messages.json); any other is a `GenericPart` (its `type` is the producer's)."""


def message_text(message: dict[str, Any]) -> str:
    """The concatenated text content of one message: its text parts, tool responses, and
    the text `content` of a generic part (a type the conventions do not name)."""
    return _text_of(message, _READ_PARTS, generic=True)


def typed_text(message: dict[str, Any]) -> str:
    """The text of one message's own words: its string content and text parts (no tool
    response, document or file part)."""
    return _text_of(message, _TYPED_PARTS)


_READ_PARTS = frozenset({"text", "tool_call_response"})
_TYPED_PARTS = frozenset({"text"})


def _text_of(message: dict[str, Any], part_types: frozenset[str], generic: bool = False) -> str:
    """A message's string content and the texts of its parts of `part_types` (and of its
    generic parts' text content, with `generic`), joined."""
    content = message.get("content")
    texts = [content] if isinstance(content, str) else []
    for part in _parts(message):
        kind = part.get("type")
        if kind == "tool_call_response" and kind in part_types:
            texts.append(str(part.get("response") or part.get("content") or ""))
        elif kind in part_types:
            texts.append(str(part.get("content") or ""))
        elif generic and kind not in NAMED_PART_TYPES and isinstance(part.get("content"), str):
            texts.append(part["content"])
    return "\n".join(texts)


def message_tool_calls(message: dict[str, Any]) -> list[RequestedToolCall]:
    """The tool calls a message requests, in order."""
    calls = [
        RequestedToolCall(str(p.get("id") or ""), str(p.get("name") or ""), p.get("arguments"))
        for p in _parts(message)
        if p.get("type") == "tool_call"
    ]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function = call.get("function") or {}
            calls.append(
                RequestedToolCall(
                    str(call.get("id") or ""), str(function.get("name")), function.get("arguments")
                )
            )
    return calls


def requested_calls(messages: list[dict[str, Any]]) -> list[RequestedToolCall]:
    """The tool calls a model's output `messages` request, a final answer asked for as a
    tool call (`genai_mapping.FINAL_ANSWERS`) left out: it is the answer."""
    calls = (call for message in messages for call in message_tool_calls(message))
    return [call for call in calls if call.name not in FINAL_ANSWER_TOOLS]


def answer_text(messages: list[dict[str, Any]]) -> str:
    """The answer a model's output `messages` give: the assistant's text, then the text of
    each final answer asked for as a tool call (`genai_mapping.FINAL_ANSWERS`)."""
    texts = [assistant_text(messages)]
    for message in messages:
        texts += [leaf_text(answer) for answer in _final_answers(message)]
    return "\n".join(t for t in texts if t)


def _final_answers(message: dict[str, Any]) -> list[Any]:
    """The answers of the final-answer tool calls of one message (parts, then OpenAI's)."""
    calls = [(p.get("name"), p.get("arguments")) for p in _parts(message)
             if p.get("type") == "tool_call"]  # fmt: skip
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            calls.append((function.get("name"), function.get("arguments")))
    answers = []
    for name, arguments in calls:
        if name not in FINAL_ANSWER_TOOLS:
            continue
        if isinstance(arguments, str):
            arguments = parse_json(arguments)
        rule = next(r for r in FINAL_ANSWERS if r.tool == name)
        if isinstance(arguments, dict) and rule.argument in arguments:
            answers.append(arguments[rule.argument])
    return answers


def assistant_text(messages: list[dict[str, Any]]) -> str:
    """The text of the assistant messages in `messages` (a message without a role counts as
    the assistant's), joined by newlines."""
    texts = [message_text(m) for m in messages if m.get("role", "assistant") == "assistant"]
    return "\n".join(t for t in texts if t)


def request_text(messages: list[dict[str, Any]]) -> str:
    """The text the user typed in the last user message of `messages` that holds any: the
    request the turn answers (a model call's input holds the conversation so far; its
    last user message is this turn's). Tool responses, documents and files in a user
    message (Gemini sends function responses as the user's) are not the user's words;
    "" when there is none."""
    for message in reversed(messages):
        if message.get("role") == "user":
            text = typed_text(message)
            if text.strip():
                return text
    return ""


UNTRUSTED_PART_TYPES = frozenset({"document", "file", "tool_call_response"})
"""Message part types whose content the agent did not get from the user."""


def untrusted_texts(message: dict[str, Any]) -> list[str]:
    """The texts of `message` the user did not type: a tool message's content (or the text
    of each of its parts), and document, file and tool-response parts of any message."""
    if message.get("role") == "tool":
        content = message.get("content")
        # each part's text as the tool gave it (a tool result's text, repeated)
        parts = None if content else _parts(message)
        if not parts:
            return [leaf_text(content or message.get("parts") or "")]
    else:
        parts = [part for part in _parts(message) if part.get("type") in UNTRUSTED_PART_TYPES]
    return [leaf_text(part.get("content") or part.get("response") or "") for part in parts]


def leaf_text(value: Any) -> str:
    """A JSON value's text as a reader would see it: a string as it is; an object or array
    (a structured tool response) as its string and number leaves, one per line, in order
    (not its Python repr, whose quotes and escaped newlines split the words predicates
    look for)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict | list):
        return str(value)
    leaves: list[str] = []
    pending: list[Any] = [value]
    while pending:  # depth first, in order, without recursion (depth is the sender's)
        item = pending.pop()
        if isinstance(item, dict | list):
            pending.extend(reversed(item.values() if isinstance(item, dict) else item))
        elif item is not None:
            leaves.append(item if isinstance(item, str) else str(item))
    return "\n".join(leaves)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


class GrowingArrays(Generic[T]):
    """A result over JSON array texts that grow by appending elements: a model call's
    input is the previous call's plus the newest messages. For a text whose caller-given
    key (a trace id, say) last came with a prefix of it, only the new elements are read
    (`compute` of them as an array of their own) and combined with the prefix's result;
    any other text is computed whole. Bounded: the oldest keys are forgotten."""

    def __init__(
        self, compute: Callable[[str], T], combine: Callable[[T, T], T], limit: int = 1024
    ) -> None:
        self.compute = compute
        self.combine = combine
        self.limit = limit
        self._latest: OrderedDict[Hashable, tuple[str, T]] = OrderedDict()

    def __call__(self, key: Hashable, text: str) -> T:
        known = self._latest.pop(key, None)
        if known is not None and known[0] == text:
            result = known[1]
        elif known is not None and _extends(text, known[0]):
            result = self.combine(known[1], self.compute("[" + text[len(known[0]) :]))
        else:
            result = self.compute(text)
        self._latest[key] = (text, result)
        if len(self._latest) > self.limit:
            self._latest.popitem(last=False)
        return result


def _extends(text: str, prior: str) -> bool:
    """True when JSON array `text` is `prior` with more elements after its last one."""
    end = len(prior) - 1
    return (
        len(text) > len(prior)
        and prior.endswith("]")
        and text[end] == ","
        and text.startswith(prior[:end])
    )
