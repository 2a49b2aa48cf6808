"""Canonical spans -> column data for the ClickHouse `spans` table.

Attribute values are stringified the way the OpenTelemetry Collector's ClickHouse exporter
does (strings as is, booleans `true`/`false`, numbers in decimal, arrays and maps as JSON,
bytes as base64) so Grafana's trace views read `SpanAttributes` unchanged. Captured
content (`schemas.genai.is_content_key`; every attribute of a content event) goes to
`ContentAttributes` / `EventContentAttributes` instead, which the store keeps only for
the content retention (migration 0010); the facts stay in `SpanAttributes`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from pathgrade.schemas.genai import CONTENT_EVENTS, is_content_key
from pathgrade.schemas.model import Span, SpanEvent, SpanLink

SPAN_COLUMNS: tuple[str, ...] = (
    "Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
    "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
    "ContentAttributes", "Duration", "StatusCode", "StatusMessage",
    "Events.Timestamp", "Events.Name", "Events.Attributes",
    "Links.TraceId", "Links.SpanId", "Links.TraceState", "Links.Attributes",
    "Tenant", "GenAIOperation", "GenAIProvider", "GenAIAgentName", "GenAIAgentId",
    "GenAIToolName", "GenAIToolCallId", "GenAIToolType", "GenAIToolArguments",
    "GenAIToolResult", "GenAIConversationId", "GenAIRequestModel", "GenAIResponseModel",
    "GenAIInputTokens", "GenAIOutputTokens", "GenAITotalTokens", "GenAIErrorType",
    "GenAIInputMessages", "GenAIOutputMessages",
    "EvalDatasetItemId", "EvalRunId", "EvalReplayIndex", "EvalVariantId", "EvalSuiteVersion",
    "ReceivedAt", "EventContentAttributes",
)  # fmt: skip


def attribute_text(value: Any) -> str:
    """One attribute value as the text the ClickHouse exporter stores."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return _json_text(value)


def _json_default(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"attribute value of type {type(value).__name__} is not serialisable")


_json_text = json.JSONEncoder(separators=(",", ":"), default=_json_default).encode


def attributes_text(attributes: dict[str, Any]) -> dict[str, str]:
    """`attribute_text` of every value (strings, the common case, pass straight through)."""
    return {
        key: value if value.__class__ is str else attribute_text(value)
        for key, value in attributes.items()
    }


_MAX_CACHED_KEYS = 4096
_content_keys: dict[str, bool] = {}  # key -> is_content_key(key), bounded


def split_content(attributes: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """`attributes_text` split into (the other attributes, the content attributes)."""
    plain: dict[str, str] = {}
    content: dict[str, str] = {}
    verdicts = _content_keys
    for key, value in attributes.items():
        verdict = verdicts.get(key)
        if verdict is None:
            if len(verdicts) >= _MAX_CACHED_KEYS:
                verdicts.clear()
            verdict = verdicts[key] = is_content_key(key)
        (content if verdict else plain)[key] = (
            value if value.__class__ is str else attribute_text(value)
        )
    return plain, content


class _LastResource:
    """`attributes_text` of the last resource seen: the spans of one resource share one
    read-only dict (see content.otlp), so consecutive spans reuse its text."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[dict[str, Any], dict[str, str]] = ({}, {})

    def text(self, attributes: dict[str, Any]) -> dict[str, str]:
        last = self._last  # one read: safe when several threads share this memo
        if last[0] is attributes:
            return last[1]
        text = attributes_text(attributes)
        self._last = (attributes, text)
        return text


_resource_text = _LastResource().text


def span_row(span: Span) -> list[Any]:
    """The values of one span in SPAN_COLUMNS order."""
    g = span.genai
    e = span.eval
    event_times, event_names, event_attributes, event_content = _event_columns(span.events)
    link_traces, link_spans, link_states, link_attributes = _link_columns(span.links)
    attributes, content = split_content(span.attributes)
    return [
        span.start_ns, span.trace_id, span.span_id, span.parent_span_id, span.trace_state,
        span.name, span.kind, span.service_name, _resource_text(span.resource_attributes),
        span.scope_name, span.scope_version, attributes, content,
        span.duration_ns, span.status_code, span.status_message,
        event_times, event_names, event_attributes,
        link_traces, link_spans, link_states, link_attributes,
        span.tenant, g.operation, g.provider_name, g.agent_name, g.agent_id,
        g.tool_name, g.tool_call_id, g.tool_type, g.tool_arguments,
        g.tool_result, g.conversation_id, g.request_model, g.response_model,
        g.input_tokens, g.output_tokens, g.total_tokens, g.error_type,
        g.input_messages, g.output_messages,
        e.dataset_item_id, e.run_id, e.replay_index, e.variant_id, e.suite_version,
        span.received_at_ns, event_content,
    ]  # fmt: skip


def _event_columns(events: list[SpanEvent]) -> tuple[list, list, list, list]:
    """The Events.* values of a span and its EventContentAttributes (most spans have no
    events: no comprehension then)."""
    if not events:
        return [], [], [], []
    split = [_event_split(ev) for ev in events]
    return (
        [ev.time_ns for ev in events],
        [ev.name for ev in events],
        [plain for plain, _ in split],
        [content for _, content in split],
    )


def _event_split(event: SpanEvent) -> tuple[dict[str, str], dict[str, str]]:
    """An event's attributes as (others, content): a content event's are all content."""
    if event.name in CONTENT_EVENTS:
        return {}, attributes_text(event.attributes)
    return split_content(event.attributes)


def _link_columns(links: list[SpanLink]) -> tuple[list, list, list, list]:
    """The Links.* values of a span."""
    if not links:
        return [], [], [], []
    return (
        [ln.trace_id for ln in links],
        [ln.span_id for ln in links],
        [ln.trace_state for ln in links],
        [attributes_text(ln.attributes) for ln in links],
    )


def span_rows(spans: Sequence[Span]) -> list[list[Any]]:
    return [span_row(span) for span in spans]
