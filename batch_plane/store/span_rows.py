"""Canonical spans -> column data for the ClickHouse `spans` table.

Attribute values are stringified the way the OpenTelemetry Collector's ClickHouse exporter
does (strings as is, booleans `true`/`false`, numbers in decimal, arrays and maps as JSON,
bytes as base64) so Grafana's trace views read `SpanAttributes` unchanged.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from pathgrade.schemas.model import Span, SpanEvent, SpanLink

SPAN_COLUMNS: tuple[str, ...] = (
    "Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
    "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
    "Duration", "StatusCode", "StatusMessage",
    "Events.Timestamp", "Events.Name", "Events.Attributes",
    "Links.TraceId", "Links.SpanId", "Links.TraceState", "Links.Attributes",
    "Tenant", "GenAIOperation", "GenAIProvider", "GenAIAgentName", "GenAIAgentId",
    "GenAIToolName", "GenAIToolCallId", "GenAIToolType", "GenAIToolArguments",
    "GenAIToolResult", "GenAIConversationId", "GenAIRequestModel", "GenAIResponseModel",
    "GenAIInputTokens", "GenAIOutputTokens", "GenAITotalTokens", "GenAIErrorType",
    "GenAIInputMessages", "GenAIOutputMessages",
    "EvalDatasetItemId", "EvalRunId", "EvalReplayIndex", "EvalVariantId", "EvalSuiteVersion",
    "ReceivedAt",
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


class _LastResource:
    """`attributes_text` of the last resource seen: the spans of one resource share one
    read-only dict (see schemas.otlp), so consecutive spans reuse its text."""

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
    event_times, event_names, event_attributes = _event_columns(span.events)
    link_traces, link_spans, link_states, link_attributes = _link_columns(span.links)
    return [
        span.start_ns, span.trace_id, span.span_id, span.parent_span_id, span.trace_state,
        span.name, span.kind, span.service_name, _resource_text(span.resource_attributes),
        span.scope_name, span.scope_version, attributes_text(span.attributes),
        span.duration_ns, span.status_code, span.status_message,
        event_times, event_names, event_attributes,
        link_traces, link_spans, link_states, link_attributes,
        span.tenant, g.operation, g.provider_name, g.agent_name, g.agent_id,
        g.tool_name, g.tool_call_id, g.tool_type, g.tool_arguments,
        g.tool_result, g.conversation_id, g.request_model, g.response_model,
        g.input_tokens, g.output_tokens, g.total_tokens, g.error_type,
        g.input_messages, g.output_messages,
        e.dataset_item_id, e.run_id, e.replay_index, e.variant_id, e.suite_version,
        span.received_at_ns,
    ]  # fmt: skip


def _event_columns(events: list[SpanEvent]) -> tuple[list, list, list]:
    """The Events.* values of a span (most spans have none: no comprehension then)."""
    if not events:
        return [], [], []
    return (
        [ev.time_ns for ev in events],
        [ev.name for ev in events],
        [attributes_text(ev.attributes) for ev in events],
    )


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
