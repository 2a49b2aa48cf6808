"""Redaction: what the collector removes or scrubs before a span leaves it.

Two steps, in place, per span:

1. Content attributes that are not opted in are removed: tool arguments/results unless the
   tool is listed in `capture_tools`, and message content (prompts, completions, system
   instructions, the attributes of content-carrying events) unless `capture_messages`.
   A span that lost attributes gets `pathgrade.redacted.keys` (int): how many attributes
   were removed from it and its events, so readers can tell "redacted" from "absent".
2. Every remaining string value (span, event and link attributes, resource and scope
   attributes, nested arrays and key-value lists) is scrubbed: e-mail addresses become
   `[REDACTED:email]`, Luhn-valid card numbers `[REDACTED:card]`, and matches of the
   configured extra patterns `[REDACTED]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableSequence
from dataclasses import dataclass
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.schemas.genai import (
    CONTENT_EVENTS,
    OI_INPUT_VALUE,
    OI_OUTPUT_VALUE,
    OI_SPAN_KIND,
    OI_SPAN_KIND_TOOL,
    OI_TOOL_NAME,
    OP_EXECUTE_TOOL,
    OPERATION_NAME,
    PG_REDACTED_KEYS,
    TL_ENTITY_INPUT,
    TL_ENTITY_NAME,
    TL_ENTITY_OUTPUT,
    TL_SPAN_KIND,
    TL_SPAN_KIND_TOOL,
    TOOL_CONTENT_KEYS,
    TOOL_NAME,
    is_content_key,
)
from pydantic import BaseModel, ConfigDict, Field, field_validator

EMAIL_MARK: Final = "[REDACTED:email]"
CARD_MARK: Final = "[REDACTED:card]"
PATTERN_MARK: Final = "[REDACTED]"
CAPTURE_ALL_TOOLS: Final = "*"

# Keys that carry tool arguments/results on tool spans and message content elsewhere.
_TOOL_OR_MESSAGE_KEYS = frozenset(
    {OI_INPUT_VALUE, OI_OUTPUT_VALUE, TL_ENTITY_INPUT, TL_ENTITY_OUTPUT}
)
_SPAN_CONTEXT_KEYS = frozenset(
    {OPERATION_NAME, OI_SPAN_KIND, TL_SPAN_KIND, TOOL_NAME, OI_TOOL_NAME, TL_ENTITY_NAME}
)
# Bounded local part and labels (RFC 5321 sizes) keep the scan linear on hostile input.
_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,63}"
)
_CARD_MIN_DIGITS = 13
_CARD_MAX_DIGITS = 19
# A run of 13-19 digits, single spaces or dashes allowed between digits, not inside a longer run.
_CARD_CANDIDATE = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")
# Luhn: a doubled digit contributes the sum of its digits (e.g. 7 -> 14 -> 5).
_LUHN_DOUBLED = {str(d): (2 * d) // 10 + (2 * d) % 10 for d in range(10)}
_ANY_DIGIT = re.compile(r"\d")  # cheap pre-check before the card regex
_MAX_CACHED_KEYS = 4096
_MAX_CACHED_TEXTS = 16_384
_MAX_CACHED_TEXT_CHARS = 256


class RedactionConfig(BaseModel):
    """What content the collector lets through; everything else is removed or scrubbed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capture_tools: list[str] = Field(
        default_factory=list,
        description='Tool names whose arguments and results are kept; "*" keeps every tool\'s. '
        "Empty (the default) keeps none.",
    )
    capture_messages: bool = Field(
        default=False,
        description="Keep message content: prompts, completions, system instructions.",
    )
    extra_patterns: list[str] = Field(
        default_factory=list,
        description="Extra regular expressions whose matches in any string value become "
        "[REDACTED].",
    )

    @field_validator("extra_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for index, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"extra_patterns[{index}] {pattern!r} is not a valid regular expression: {exc}"
                ) from exc
        return patterns


@dataclass(slots=True)
class RedactionStats:
    """What one `Redactor.redact` call did."""

    spans: int = 0
    removed_attributes: int = 0
    scrubbed_values: int = 0


def luhn_valid(digits: str) -> bool:
    """True when `digits` (ASCII digits only, at least two) passes the Luhn checksum."""
    if len(digits) < 2 or not digits.isascii() or not digits.isdigit():
        return False
    total = sum(map(int, digits[-1::-2])) + sum(map(_LUHN_DOUBLED.__getitem__, digits[-2::-2]))
    return total % 10 == 0


class Redactor:
    """Applies a `RedactionConfig` to export requests, in place.

    One pass per attribute list: each key's content verdict and each short string's scrubbed
    form are remembered (bounded), since agents repeat the same keys and many of the values.
    """

    def __init__(self, config: RedactionConfig) -> None:
        self.config = config
        self._all_tools = CAPTURE_ALL_TOOLS in config.capture_tools
        self._captured_tools = frozenset(config.capture_tools)
        self._extra_patterns = [re.compile(pattern) for pattern in config.extra_patterns]
        self._content_keys = _BoundedCache(_MAX_CACHED_KEYS)
        self._scrubbed_texts = _BoundedCache(_MAX_CACHED_TEXTS)
        self._policies = {
            (tool_span, captured): _ContentPolicy(tool_span, captured, config.capture_messages)
            for tool_span in (False, True)
            for captured in (False, True)
        }

    def redact(self, request: ExportTraceServiceRequest) -> RedactionStats:
        """Remove content that is not opted in, then scrub every remaining string value."""
        stats = RedactionStats()
        scrub = self._scrub_attributes
        for resource_spans in request.resource_spans:
            stats.scrubbed_values += scrub(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                stats.scrubbed_values += scrub(scope_spans.scope.attributes)
                for span in scope_spans.spans:
                    stats.spans += 1
                    self._redact_span(span, stats)
        return stats

    def scrub_text(self, text: str) -> str:
        """`text` with e-mails, Luhn-valid card numbers and extra-pattern matches replaced."""
        if "@" in text:
            text = _EMAIL.sub(EMAIL_MARK, text)
        if len(text) >= _CARD_MIN_DIGITS and _ANY_DIGIT.search(text):
            text = _CARD_CANDIDATE.sub(_replace_card, text)
        for pattern in self._extra_patterns:
            text = pattern.sub(PATTERN_MARK, text)
        return text

    def _redact_span(self, span: trace_pb2.Span, stats: RedactionStats) -> None:
        """Remove the span's unkept content (span and events), scrub everything left.

        One pass per attribute list scrubs the non-content values and notes the content
        ones; those are then kept (and scrubbed) or removed once the span's policy is known.
        """
        attributes = span.attributes
        context: dict[str, str] = {}
        content, scrubbed = self._scan(attributes, context)
        keep = self._policy(context)
        removed = self._settle(attributes, content, keep, stats)
        for event in span.events:
            event_attributes = event.attributes
            if event.name in CONTENT_EVENTS and not keep.messages_captured:
                removed += _delete(event_attributes, range(len(event_attributes)))
                continue
            event_content, event_scrubbed = self._scan(event_attributes, None)
            scrubbed += event_scrubbed
            removed += self._settle(event_attributes, event_content, keep, stats)
        for link in span.links:
            scrubbed += self._scrub_attributes(link.attributes)
        if removed:
            attributes.add(key=PG_REDACTED_KEYS).value.int_value = removed
        stats.removed_attributes += removed
        stats.scrubbed_values += scrubbed

    def _scan(
        self, attributes: Iterable[KeyValue], context: dict[str, str] | None
    ) -> tuple[list[int], int]:
        """Scrub the non-content values; return the content indexes and how many values
        changed. Fills `context` with the (unscrubbed) policy keys when given."""
        verdicts = self._content_keys
        scrub = self._scrub_value
        content = []
        scrubbed = 0
        for index, kv in enumerate(attributes):
            key = kv.key
            verdict = verdicts.get(key)
            if verdict is None:
                verdict = verdicts.put(key, is_content_key(key))
            if verdict:
                content.append(index)
                continue
            value = kv.value
            if context is not None and key in _SPAN_CONTEXT_KEYS:
                context[key] = value.string_value
            scrubbed += scrub(value)
        return content, scrubbed

    def _settle(
        self,
        attributes: MutableSequence[KeyValue],
        content: list[int],
        keep: _ContentPolicy,
        stats: RedactionStats,
    ) -> int:
        """Scrub the kept content values, delete the others; returns how many were deleted."""
        unkept = []
        for index in content:
            kv = attributes[index]
            if keep.keeps(kv.key):
                stats.scrubbed_values += self._scrub_value(kv.value)
            else:
                unkept.append(index)
        return _delete(attributes, unkept)

    def _policy(self, context: dict[str, str]) -> _ContentPolicy:
        """What the span may keep, from its operation / kind / tool-name attributes."""
        tool_captured = self._all_tools or _tool_name(context) in self._captured_tools
        return self._policies[_is_tool_span(context), tool_captured]

    def _scrub_attributes(self, attributes: Iterable[KeyValue]) -> int:
        """Scrub every string value in `attributes`; returns how many values changed."""
        scrub = self._scrub_value
        return sum([scrub(kv.value) for kv in attributes])

    def _scrub_value(self, value: AnyValue) -> int:
        """Scrub one value, descending into arrays and key-value lists."""
        kind = value.WhichOneof("value")
        if kind == "string_value":
            text = value.string_value
            clean = self._scrubbed(text)
            if clean == text:
                return 0
            value.string_value = clean
            return 1
        if kind == "array_value":
            return sum([self._scrub_value(item) for item in value.array_value.values])
        if kind == "kvlist_value":
            return self._scrub_attributes(value.kvlist_value.values)
        return 0

    def _scrubbed(self, text: str) -> str:
        """`scrub_text(text)`, remembered for short texts (ids, names, models repeat)."""
        if len(text) > _MAX_CACHED_TEXT_CHARS:
            return self.scrub_text(text)
        clean = self._scrubbed_texts.get(text)
        if clean is None:
            clean = self._scrubbed_texts.put(text, self.scrub_text(text))
        return clean


class _BoundedCache(dict):
    """A dict that forgets everything once it holds `limit` entries (hostile input cannot
    grow it without bound; the hot entries come back at once)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> Any:
        """Remember `value` under `key` and return it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


@dataclass(frozen=True, slots=True)
class _ContentPolicy:
    """Decides, for one span, whether a content attribute key is kept."""

    is_tool_span: bool
    tool_captured: bool
    messages_captured: bool

    def keeps(self, key: str) -> bool:
        """True when `key` is not content, or is content this span may keep."""
        if not is_content_key(key):
            return True
        if key in TOOL_CONTENT_KEYS or (self.is_tool_span and key in _TOOL_OR_MESSAGE_KEYS):
            return self.tool_captured
        return self.messages_captured


def _is_tool_span(context: dict[str, str]) -> bool:
    """True for a tool execution span in GenAI, OpenInference or OpenLLMetry conventions."""
    return (
        context.get(OPERATION_NAME) == OP_EXECUTE_TOOL
        or context.get(OI_SPAN_KIND) == OI_SPAN_KIND_TOOL
        or context.get(TL_SPAN_KIND) == TL_SPAN_KIND_TOOL
    )


def _tool_name(context: dict[str, str]) -> str:
    """The span's tool name: GenAI, then OpenInference, then a traceloop tool span's entity."""
    traceloop_name = (
        context.get(TL_ENTITY_NAME, "") if context.get(TL_SPAN_KIND) == TL_SPAN_KIND_TOOL else ""
    )
    return context.get(TOOL_NAME) or context.get(OI_TOOL_NAME) or traceloop_name


def _delete(attributes: MutableSequence[KeyValue], indexes: Iterable[int]) -> int:
    """Delete the attributes at ascending `indexes`; returns how many were deleted."""
    ordered = list(indexes)
    for index in reversed(ordered):
        del attributes[index]
    return len(ordered)


def _replace_card(match: re.Match[str]) -> str:
    """Replace the longest Luhn-valid card number at the start of a digit run."""
    run = match.group()
    for end in _card_ends(run):
        if luhn_valid(_only_digits(run[:end])):
            return CARD_MARK + run[end:]
    return run


def _card_ends(run: str) -> list[int]:
    """Where a card may end inside `run`: its end, then before each separator, longest first.

    Handles a card followed by more digits, e.g. "4111 1111 1111 1111 12".
    """
    separators = [index for index, char in enumerate(run) if char in " -"]
    # (end, digits before end); k separators precede the k-th separator.
    candidates = [(len(run), len(run) - len(separators))]
    candidates += [(end, end - k) for k, end in reversed(list(enumerate(separators)))]
    return [end for end, digits in candidates if _CARD_MIN_DIGITS <= digits <= _CARD_MAX_DIGITS]


def _only_digits(text: str) -> str:
    """`text` without its space and dash separators."""
    return text.replace(" ", "").replace("-", "")
