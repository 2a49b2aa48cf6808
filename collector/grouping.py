"""Group the spans of one export request by trace: one OTLP `TracesData` per trace.

This is the OTel Collector Kafka exporter's `partition_traces_by_id` shape: each message
holds spans of exactly one trace, keyed by the trace id in lowercase hex. A trace whose
spans exceed `max_message_bytes` is split into several messages, each still one trace.
"""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData

DEFAULT_MAX_MESSAGE_BYTES = 900 * 1024  # under Kafka's default message.max.bytes (1 MiB)


def group_by_trace(
    request: ExportTraceServiceRequest, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> list[tuple[bytes, bytes]]:
    """(key, value) messages for `request`: key = trace id hex, value = TracesData bytes."""
    per_trace: dict[bytes, list[tuple[int, int, Span]]] = {}
    for r_index, resource_spans in enumerate(request.resource_spans):
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            for span in scope_spans.spans:
                per_trace.setdefault(span.trace_id, []).append((r_index, s_index, span))
    messages = []
    for trace_id, entries in per_trace.items():
        key = trace_id.hex().encode()
        messages.extend((key, value) for value in _encode(request, entries, max_message_bytes))
    return messages


def _encode(
    request: ExportTraceServiceRequest,
    entries: list[tuple[int, int, Span]],
    max_message_bytes: int,
) -> list[bytes]:
    """TracesData bytes for one trace's spans, split into chunks under the size bound."""
    chunks: list[list[tuple[int, int, Span]]] = [[]]
    size = 0
    for entry in entries:
        span_size = entry[2].ByteSize()
        if chunks[-1] and size + span_size > max_message_bytes:
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += span_size
    return [_traces_data(request, chunk).SerializeToString() for chunk in chunks]


def _traces_data(
    request: ExportTraceServiceRequest, entries: list[tuple[int, int, Span]]
) -> TracesData:
    data = TracesData()
    scopes: dict[tuple[int, int], ScopeSpans] = {}
    resources: dict[int, ResourceSpans] = {}
    for r_index, s_index, span in entries:
        scope = scopes.get((r_index, s_index))
        if scope is None:
            source_resource = request.resource_spans[r_index]
            resource = resources.get(r_index)
            if resource is None:
                resource = data.resource_spans.add()
                resource.resource.CopyFrom(source_resource.resource)
                resource.schema_url = source_resource.schema_url
                resources[r_index] = resource
            source_scope = source_resource.scope_spans[s_index]
            scope = resource.scope_spans.add()
            scope.scope.CopyFrom(source_scope.scope)
            scope.schema_url = source_scope.schema_url
            scopes[(r_index, s_index)] = scope
        scope.spans.append(span)
    return data
