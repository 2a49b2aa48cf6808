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

from schemas.model import Span

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
    return json.dumps(value, separators=(",", ":"), default=_json_default)


def _json_default(value: Any) -> str:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"attribute value of type {type(value).__name__} is not serialisable")


def attributes_text(attributes: dict[str, Any]) -> dict[str, str]:
    return {key: attribute_text(value) for key, value in attributes.items()}


def span_row(span: Span) -> list[Any]:
    """The values of one span in SPAN_COLUMNS order."""
    g = span.genai
    e = span.eval
    events = span.events
    links = span.links
    return [
        span.start_ns, span.trace_id, span.span_id, span.parent_span_id, span.trace_state,
        span.name, span.kind, span.service_name, attributes_text(span.resource_attributes),
        span.scope_name, span.scope_version, attributes_text(span.attributes),
        span.duration_ns, span.status_code, span.status_message,
        [ev.time_ns for ev in events], [ev.name for ev in events],
        [attributes_text(ev.attributes) for ev in events],
        [ln.trace_id for ln in links], [ln.span_id for ln in links],
        [ln.trace_state for ln in links], [attributes_text(ln.attributes) for ln in links],
        span.tenant, g.operation, g.provider_name, g.agent_name, g.agent_id,
        g.tool_name, g.tool_call_id, g.tool_type, g.tool_arguments,
        g.tool_result, g.conversation_id, g.request_model, g.response_model,
        g.input_tokens, g.output_tokens, g.total_tokens, g.error_type,
        g.input_messages, g.output_messages,
        e.dataset_item_id, e.run_id, e.replay_index, e.variant_id, e.suite_version,
        span.received_at_ns,
    ]  # fmt: skip


def span_rows(spans: Sequence[Span]) -> list[list[Any]]:
    return [span_row(span) for span in spans]
