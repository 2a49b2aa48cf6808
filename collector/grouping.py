"""Group the spans of one export request by trace: one OTLP `TracesData` per trace; and the
log records of a logs request by partition: one `LogsData` per partition of the logs topic
the request's traces go to (`group_logs`).

Spans take the OTel Collector Kafka exporter's `partition_traces_by_id` shape: each
message holds spans of exactly one trace, keyed by the trace id in lowercase hex. Records
hold the records of every trace of the request whose key hashes to the same partition
(`partitioner.key_partition`), keyed by the trace id of the first of them, so the message
lands on the partition each of its traces' spans go to (the topics are co-partitioned)
and a request of many traces makes a message per partition, not per trace. Without the
topic's partition count (before the producer learned it), records are grouped by trace as
spans are. A group (a trace, or a partition's traces) whose items exceed
`max_message_bytes` is split into several messages, each still of that group.

Every message is at most `max_message_bytes` once encoded, its resource and scope
included: sizes are summed from each part's encoded size plus the most its field framing
can take. A span that cannot fit in a message of its own (its encoded size with its
resource and scope, after redaction) is refused here, before anything is acknowledged,
so no message is ever built that Kafka would refuse as too large.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from pathgrade.collector.forwarded import ForwardedSpan, ForwardedSpans
from pathgrade.collector.limits import DEFAULT_MAX_MESSAGE_BYTES
from pathgrade.collector.partitioner import key_partition
from pathgrade.collector.validate import Rejections, describe_record, span_line

# A length-delimited field costs its tag (1 byte for the field numbers used here) and a
# varint length (at most 5 bytes below 4 GiB) besides its content.
_FIELD_OVERHEAD = 6
# Each resource and scope of a message costs its own encoded size, its schema URL and up
# to two levels of framing (ResourceSpans in TracesData, Resource in ResourceSpans, ...).
_GROUP_OVERHEAD = 3 * _FIELD_OVERHEAD

_ENCODING = attrgetter("encoding")
"""A `ForwardedSpan`'s encoding (a C call, per span)."""
_Entry = tuple[int, int, Any, bytes]  # resource index, scope index, span or record, encoding
_Resource = tuple[bytes, str, Iterable[tuple[bytes, str, Iterable[Any]]]]
"""A resource as `_group` reads it: encoded, its schema URL, its scopes (encoded, schema
URL, items)."""

# Tags of the length-delimited fields a TracesData is made of: TracesData.resource_spans,
# ResourceSpans.resource and ScopeSpans.scope are field 1, ResourceSpans.scope_spans and
# ScopeSpans.spans field 2, the schema URLs field 3.
_FIELD_1, _FIELD_2, _FIELD_3 = b"\x0a", b"\x12", b"\x1a"


@dataclass(slots=True)
class TraceMessage:
    """One Kafka message: spans of one trace (or log records of the traces of one
    partition), and which (for error messages)."""

    key: bytes
    value: bytes
    spans: list[Any]


@dataclass(slots=True)
class Grouped:
    """The messages of one request and the spans refused as too large to publish."""

    messages: list[TraceMessage] = field(default_factory=list)
    rejections: Rejections = field(default_factory=Rejections)


def group_by_trace(
    forwarded: ForwardedSpans, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Grouped:
    """Messages for the `forwarded` spans of a request (key = trace id hex, value =
    TracesData bytes, each at most `max_message_bytes`), and the spans refused because no
    message could hold them. Each message holds the spans' encodings as forwarded
    (`Redactor.forward`), nothing read from the request itself."""
    return _group(forwarded.resources, _SPANS, max_message_bytes, _ENCODING)


def group_logs(
    request: ExportLogsServiceRequest,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    partitions: int | None = None,
) -> Grouped:
    """Messages for a logs `request` (LogsData bytes, each at most `max_message_bytes`) and
    the records refused because no message could hold them. With `partitions` (the logs
    topic's partition count): the records of every trace whose key goes to one partition
    in one message, keyed by its first record's trace id hex; without: the records of one
    trace per message (the OTel Collector Kafka exporter's `partition_logs_by_trace_id`
    shape), keyed by it. Records that carry no trace id are keyed "" as a trace."""
    group_of = None if partitions is None else _partition_of(partitions)
    return _group(_log_resources(request), _LOGS, max_message_bytes, _serialized, group_of)


def _partition_of(partitions: int) -> Callable[[bytes], Any]:
    """A trace id's group: the place of the partition its hex key goes to (hashed once per
    trace of the request: a trace's records usually come several to a request)."""
    places: dict[bytes, int] = {}

    def place(trace_id: bytes) -> int:
        found = places.get(trace_id)
        if found is None:
            found = places[trace_id] = key_partition(trace_id.hex().encode(), partitions)
        return found

    return place


def _log_resources(request: ExportLogsServiceRequest) -> Iterator[_Resource]:
    """A logs request's resources as `_group` reads them: each encoded, its schema URL, its
    scopes (encoded, schema URL, records)."""
    for holder in request.resource_logs:
        scopes = [(s.scope.SerializeToString(), s.schema_url, s.log_records)
                  for s in holder.scope_logs]  # fmt: skip
        yield holder.resource.SerializeToString(), holder.schema_url, scopes


def _serialized(item: Message) -> bytes:
    return item.SerializeToString()


def _describe_forwarded(span: ForwardedSpan, path: str, problem: str) -> str:
    return span_line(span.trace_id, span.span_id, path, problem)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a signal's index paths call its resources, scopes and items (OTLP traces and
    logs are built alike), and how a refused item's line names it."""

    path: tuple[str, str, str]
    describe: Callable[[Any, str, str], str]


_SPANS = _Shape(("resourceSpans", "scopeSpans", "spans"), _describe_forwarded)
_LOGS = _Shape(("resourceLogs", "scopeLogs", "logRecords"), describe_record)


def _group(
    resources: Iterable[_Resource],
    shape: _Shape,
    max_message_bytes: int,
    encode: Callable[[Any], bytes],
    group_of: Callable[[bytes], Any] | None = None,
) -> Grouped:
    """The messages of one request's items (spans or log records: `shape`), each encoded
    by `encode(item)`, grouped by trace, or by `group_of(trace id)` when given; each
    message keyed by the trace id hex of its first item (see the module's docstring)."""
    grouped = Grouped()
    parts: list[tuple[bytes, bytes]] = []  # per resource: its encoding, its schema URL
    scopes: dict[tuple[int, int], tuple[bytes, bytes]] = {}  # the same per scope
    group_costs: dict[tuple[int, int], tuple[int, int]] = {}  # (resource, scope) costs
    per_group: dict[Any, list[_Entry]] = {}  # trace id or `group_of` it -> its items
    bound = 0  # the most any message of this request can take: everything in it
    resource_path, scope_path, item_path = shape.path
    for r_index, (resource, resource_url, resource_scopes) in enumerate(resources):
        url = resource_url.encode()
        parts.append(_parts(resource, url))
        resource_cost = _GROUP_OVERHEAD + len(resource) + len(url)
        for s_index, (scope, scope_url, items) in enumerate(resource_scopes):
            url = scope_url.encode()
            scopes[(r_index, s_index)] = _parts(scope, url)
            scope_cost = _GROUP_OVERHEAD + len(scope) + len(url)
            group_costs[(r_index, s_index)] = (resource_cost, scope_cost)
            bound += resource_cost + scope_cost
            for i, item in enumerate(items):
                encoded = encode(item)
                cost = _FIELD_OVERHEAD + len(encoded)
                alone = cost + scope_cost + resource_cost
                if alone > max_message_bytes:
                    path = f"{resource_path}[{r_index}].{scope_path}[{s_index}].{item_path}[{i}]"
                    problem = _too_large(alone, max_message_bytes)
                    grouped.rejections.add(shape.describe(item, path, problem))
                    continue
                group = item.trace_id if group_of is None else group_of(item.trace_id)
                per_group.setdefault(group, []).append((r_index, s_index, item, encoded))
                bound += cost
    fits = bound <= max_message_bytes  # the common case: one message per group
    for entries in per_group.values():
        for chunk in [entries] if fits else _chunks(entries, group_costs, max_message_bytes):
            value = _traces_data(parts, scopes, chunk)
            items = [entry[2] for entry in chunk]
            grouped.messages.append(TraceMessage(items[0].trace_id.hex().encode(), value, items))
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
    """One group's items split into chunks whose messages fit `max_message_bytes`."""
    chunks: list[list[_Entry]] = [[]]
    size = 0
    resources: set[int] = set()
    scopes: set[tuple[int, int]] = set()
    for entry in entries:
        r_index, s_index, _, encoded = entry
        cost = _FIELD_OVERHEAD + len(encoded)
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


def _parts(encoded: bytes, url: bytes) -> tuple[bytes, bytes]:
    """A resource's or scope's fields as they open and close its group in a message: the
    encoded Resource or InstrumentationScope as field 1 (present even when empty, as
    `CopyFrom` makes it), and the schema URL as field 3 (b"" when empty)."""
    opening = _header(_FIELD_1, len(encoded)) + encoded
    closing = _header(_FIELD_3, len(url)) + url if url else b""
    return opening, closing


def _traces_data(
    resources: list[tuple[bytes, bytes]],
    scopes: dict[tuple[int, int], tuple[bytes, bytes]],
    entries: list[_Entry],
) -> bytes:
    """The encoded TracesData (LogsData: the same field numbers) of `entries`, written from
    the parts' encodings: the bytes `SerializeToString` gives for the same message (fields
    in number order, resources and scopes in the order their first item comes), each
    item's bytes copied once."""
    spans_of: dict[int, dict[int, list[bytes]]] = {}  # resource -> scope -> spans
    for r_index, s_index, _, encoded in entries:
        spans_of.setdefault(r_index, {}).setdefault(s_index, []).append(encoded)
    pieces: list[bytes] = []
    for r_index, scope_spans in spans_of.items():
        resource, resource_url = resources[r_index]
        resource_pieces = [resource]
        for s_index, spans in scope_spans.items():
            scope, scope_url = scopes[(r_index, s_index)]
            scope_pieces = [scope]
            for span in spans:
                scope_pieces += (_header(_FIELD_2, len(span)), span)
            scope_pieces.append(scope_url)
            resource_pieces.append(_header(_FIELD_2, sum(map(len, scope_pieces))))
            resource_pieces += scope_pieces
        resource_pieces.append(resource_url)
        pieces.append(_header(_FIELD_1, sum(map(len, resource_pieces))))
        pieces += resource_pieces
    return b"".join(pieces)


def _header(tag: bytes, length: int) -> bytes:
    """What opens a length-delimited field: its tag, then `length` as a varint."""
    if length < 0x80:  # the common case, one byte
        return tag + bytes((length,))
    header = bytearray(tag)
    while length >= 0x80:
        header.append(length & 0x7F | 0x80)
        length >>= 7
    header.append(length)
    return bytes(header)
