"""Group the spans of one export request by trace: one OTLP `TracesData` per trace.

This is the OTel Collector Kafka exporter's `partition_traces_by_id` shape: each message
holds spans of exactly one trace, keyed by the trace id in lowercase hex. A trace whose
spans exceed `max_message_bytes` is split into several messages, each still one trace.

Every message is at most `max_message_bytes` once encoded, its resource and scope
included: sizes are summed from each part's encoded size plus the most its field framing
can take. A span that cannot fit in a message of its own (its encoded size with its
resource and scope, after redaction) is refused here, before anything is acknowledged,
so no message is ever built that Kafka would refuse as too large.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData
from pathgrade.collector.validate import Rejections, describe_span

DEFAULT_MAX_MESSAGE_BYTES = 900 * 1024  # under Kafka's default message.max.bytes (1 MiB)
PRODUCER_MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The producer's `max_request_size`: the largest record it sends (collector.publisher)."""
MAX_MESSAGE_BYTES_LIMIT = PRODUCER_MAX_REQUEST_BYTES - 64 * 1024
"""Largest `max_message_bytes` allowed: a message and its record framing and headers
must stay under the producer's request size."""

# A length-delimited field costs its tag (1 byte for the field numbers used here) and a
# varint length (at most 5 bytes below 4 GiB) besides its content.
_FIELD_OVERHEAD = 6
# Each resource and scope of a message costs its own encoded size, its schema URL and up
# to two levels of framing (ResourceSpans in TracesData, Resource in ResourceSpans, ...).
_GROUP_OVERHEAD = 3 * _FIELD_OVERHEAD

_Entry = tuple[int, int, Span, int]  # resource index, scope index, span, span cost


@dataclass(slots=True)
class TraceMessage:
    """One Kafka message: spans of one trace, and which spans (for error messages)."""

    key: bytes
    value: bytes
    spans: list[Span]


@dataclass(slots=True)
class Grouped:
    """The messages of one request and the spans refused as too large to publish."""

    messages: list[TraceMessage] = field(default_factory=list)
    rejections: Rejections = field(default_factory=Rejections)


def group_by_trace(
    request: ExportTraceServiceRequest, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Grouped:
    """Messages for `request` (key = trace id hex, value = TracesData bytes, each at most
    `max_message_bytes`), and the spans refused because no message could hold them."""
    grouped = Grouped()
    group_costs: dict[tuple[int, int], tuple[int, int]] = {}  # (resource, scope) costs
    per_trace: dict[bytes, list[_Entry]] = {}
    bound = 0  # the most any message of this request can take: everything in it
    for r_index, resource_spans in enumerate(request.resource_spans):
        resource_cost = (
            _GROUP_OVERHEAD
            + resource_spans.resource.ByteSize()
            + len(resource_spans.schema_url.encode())
        )
        for s_index, scope_spans in enumerate(resource_spans.scope_spans):
            scope_cost = (
                _GROUP_OVERHEAD
                + scope_spans.scope.ByteSize()
                + len(scope_spans.schema_url.encode())
            )
            group_costs[(r_index, s_index)] = (resource_cost, scope_cost)
            bound += resource_cost + scope_cost
            for i, span in enumerate(scope_spans.spans):
                cost = _FIELD_OVERHEAD + span.ByteSize()
                alone = cost + scope_cost + resource_cost
                if alone > max_message_bytes:
                    path = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{i}]"
                    problem = _too_large(alone, max_message_bytes)
                    grouped.rejections.add(describe_span(span, path, problem))
                    continue
                per_trace.setdefault(span.trace_id, []).append((r_index, s_index, span, cost))
                bound += cost
    for trace_id, entries in per_trace.items():
        key = trace_id.hex().encode()
        fits = bound <= max_message_bytes  # the common case: one message per trace
        for chunk in [entries] if fits else _chunks(entries, group_costs, max_message_bytes):
            value = _traces_data(request, chunk).SerializeToString()
            grouped.messages.append(TraceMessage(key, value, [entry[2] for entry in chunk]))
    return grouped


def _too_large(size: int, max_message_bytes: int) -> str:
    return (
        f"encoded size of about {size} bytes with its resource and scope exceeds the "
        f"per-span limit of {max_message_bytes} bytes (max_message_bytes: the largest "
        "Kafka message the collector publishes)"
    )


def _chunks(
    entries: list[_Entry],
    group_costs: dict[tuple[int, int], tuple[int, int]],
    max_message_bytes: int,
) -> list[list[_Entry]]:
    """One trace's spans split into chunks whose messages fit `max_message_bytes`."""
    chunks: list[list[_Entry]] = [[]]
    size = 0
    resources: set[int] = set()
    scopes: set[tuple[int, int]] = set()
    for entry in entries:
        r_index, s_index, _, cost = entry
        resource_cost, scope_cost = group_costs[(r_index, s_index)]
        added = cost
        added += 0 if (r_index, s_index) in scopes else scope_cost
        added += 0 if r_index in resources else resource_cost
        if chunks[-1] and size + added > max_message_bytes:
            chunks.append([])
            size, resources, scopes = 0, set(), set()
            added = cost + scope_cost + resource_cost
        chunks[-1].append(entry)
        size += added
        resources.add(r_index)
        scopes.add((r_index, s_index))
    return chunks


def _traces_data(request: ExportTraceServiceRequest, entries: list[_Entry]) -> TracesData:
    data = TracesData()
    scopes: dict[tuple[int, int], ScopeSpans] = {}
    resources: dict[int, ResourceSpans] = {}
    for r_index, s_index, span, _ in entries:
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
