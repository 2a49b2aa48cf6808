"""Per-span validation of an OTLP export request: keep the good spans, report the bad ones
(and per record of a logs request, `validate_logs_request`).

Runs on the protobuf hot path, so each span costs only a few cheap field reads. A bad span
never takes the good spans of its request down with it (OTLP partial success).

The value limits hold at every depth: in span, event and link attributes, in resource and
scope attributes (a bad resource or scope refuses the spans it carries), and inside arrays
and key-value lists nested in any of them. No value can be longer than the encoded part
that holds it, so values are walked only in a request (then a resource, scope or span)
encoded larger than the limit: a request within it, the common case, costs no value read.
What a span adds up to in total is checked after redaction, where the Kafka messages are
built (`collector.grouping`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.schemas.model import MAX_TIME_NS

MAX_ATTRIBUTES_PER_SPAN = 1024
"""Most attributes one span may carry; a span with more is rejected."""

MAX_STRING_VALUE_BYTES = 1024 * 1024
"""Longest UTF-8 string (or bytes) value (1 MiB) accepted anywhere in a span's attributes,
its events' and links', its resource's and scope's, at any depth of nesting."""

MAX_LISTED_ERRORS = 20
"""How many bad spans the error message names before summarising the rest."""

_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
_ZERO_TRACE_ID = bytes(_TRACE_ID_BYTES)
_ZERO_SPAN_ID = bytes(_SPAN_ID_BYTES)
_MAX_SPAN_KIND = max(trace_pb2.Span.SpanKind.values())
_MAX_STATUS_CODE = max(trace_pb2.Status.StatusCode.values())
_MAX_SEVERITY = max(logs_pb2.SeverityNumber.values())
_UTF8_MAX_BYTES_PER_CHAR = 4
_MAX_TIME_TEXT = datetime.fromtimestamp(MAX_TIME_NS // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Rejections:
    """The spans refused from one request: how many, and a line per span (its ids and
    index path, the field or limit, the reason) for the first MAX_LISTED_ERRORS of them."""

    __slots__ = ("_lines", "rejected_spans")

    def __init__(self) -> None:
        self.rejected_spans = 0
        self._lines: list[str] = []

    def add(self, line: str, spans: int = 1) -> None:
        """Count `spans` refused spans described by `line`."""
        self.rejected_spans += spans
        if len(self._lines) < MAX_LISTED_ERRORS:
            self._lines.append(line)

    def extend(self, other: Rejections) -> None:
        """Add what `other` refused (its lines beyond MAX_LISTED_ERRORS are summarised)."""
        self.rejected_spans += other.rejected_spans
        self._lines.extend(other._lines[: MAX_LISTED_ERRORS - len(self._lines)])

    @property
    def error_message(self) -> str:
        """The lines joined, with "... and N more" for the spans left out; "" when none."""
        left_out = self.rejected_spans - len(self._lines)
        lines = [*self._lines, f"... and {left_out} more"] if left_out > 0 else self._lines
        return "; ".join(lines)


@dataclass(frozen=True, slots=True)
class SpanLimits:
    """Size limits applied to every span (defaults are the module constants). A dataclass,
    not a pydantic model like the configs: it is read for every attribute value of every
    span, and a model's attribute reads cost 4-5 times a slotted dataclass's."""

    max_attributes: int = MAX_ATTRIBUTES_PER_SPAN
    max_string_value_bytes: int = MAX_STRING_VALUE_BYTES


def validate_request(
    request: ExportTraceServiceRequest,
    limits: SpanLimits = SpanLimits(),
    encoded_bytes: int | None = None,
) -> Rejections:
    """Drop invalid spans from `request` IN PLACE (and then empty scopes/resources).

    Returns the number of rejected spans and a message naming each bad span by its trace and
    span id (or its index path when the ids are bad), the field and the reason.
    `encoded_bytes` is the request's encoded size when known (the protobuf body it was
    parsed from); else it is computed.
    """
    rejections = Rejections()
    size = request.ByteSize() if encoded_bytes is None else encoded_bytes
    long_values = size > limits.max_string_value_bytes  # else no value can be too long
    for r, resource_spans in enumerate(request.resource_spans):
        resource = resource_spans.resource
        resource_problem = _attribute_problem(
            resource.attributes, limits, "resource.attributes",
            walk=long_values and _larger_than_a_value(resource, limits),
        )  # fmt: skip
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = scope_spans.scope
            shared_problem = resource_problem or _attribute_problem(
                scope.attributes, limits, "scope.attributes",
                walk=long_values and _larger_than_a_value(scope, limits),
            )  # fmt: skip
            spans = scope_spans.spans
            bad_indexes = []
            for i, span in enumerate(spans):
                walk = long_values and _larger_than_a_value(span, limits)
                problem = shared_problem or span_problem(span, limits, walk)
                if problem is not None:
                    bad_indexes.append(i)
                    path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                    rejections.add(describe_span(span, path, problem))
            _delete_indexes(spans, bad_indexes)
        _delete_empty(resource_spans.scope_spans, "spans")
    _delete_empty(request.resource_spans, "scope_spans")
    return rejections


def span_problem(
    span: trace_pb2.Span, limits: SpanLimits = SpanLimits(), walk_values: bool = True
) -> str | None:
    """The first reason `span` is invalid, as "field reason", or None when it is valid;
    without `walk_values` (the span is known to be encoded within the value limit) its
    attribute values are not read."""
    return _id_problem(span) or _content_problem(span, limits, walk_values)


def _larger_than_a_value(part: Any, limits: SpanLimits) -> bool:
    """Whether a message's encoding is larger than a value may be (else none of its values
    can be over the limit)."""
    return part.ByteSize() > limits.max_string_value_bytes


def _id_problem(span: trace_pb2.Span) -> str | None:
    """A problem with the span's own trace, span or parent id (makes the ids unprintable)."""
    return (
        _bad_id("traceId", span.trace_id, _TRACE_ID_BYTES, _ZERO_TRACE_ID)
        or _bad_id("spanId", span.span_id, _SPAN_ID_BYTES, _ZERO_SPAN_ID)
        or (
            _bad_id("parentSpanId", span.parent_span_id, _SPAN_ID_BYTES, _ZERO_SPAN_ID)
            if span.parent_span_id
            else None
        )
    )


def _bad_id(field: str, value: bytes, size: int, zero: bytes) -> str | None:
    """Why an id is invalid: wrong length or all zero bytes; None when it is fine."""
    if len(value) != size:
        return f"{field} must be {size} bytes, got {len(value)}"
    if value == zero:
        return f"{field} is all zeros"
    return None


def _content_problem(span: trace_pb2.Span, limits: SpanLimits, walk_values: bool) -> str | None:
    """A problem with name, timestamps, enums, links or attributes of a span with good ids."""
    if not span.name.strip():
        return "name is empty"
    start = span.start_time_unix_nano
    if start == 0:
        return "startTimeUnixNano is 0"
    end = span.end_time_unix_nano
    if end == 0:
        return "endTimeUnixNano is 0 (span not ended; OTLP exports ended spans)"
    if end < start:
        return "endTimeUnixNano before startTimeUnixNano"
    if end > MAX_TIME_NS:
        return f"endTimeUnixNano {end} is after {_MAX_TIME_TEXT} (the store's time range)"
    if not 0 <= span.kind <= _MAX_SPAN_KIND:
        return f"kind {span.kind} is not a SpanKind (0..{_MAX_SPAN_KIND})"
    if not 0 <= span.status.code <= _MAX_STATUS_CODE:
        return f"status.code {span.status.code} is not a StatusCode (0..{_MAX_STATUS_CODE})"
    events, links = span.events, span.links
    return (
        (_event_problem(events, limits, walk_values) if events else None)
        or (_link_problem(links, limits, walk_values) if links else None)
        or _attribute_problem(span.attributes, limits, "attributes", walk_values, True)
    )


def _event_problem(
    events: RepeatedCompositeFieldContainer[trace_pb2.Span.Event],
    limits: SpanLimits,
    walk_values: bool,
) -> str | None:
    """An event after the store's time range, or with bad attributes."""
    for k, event in enumerate(events):
        if event.time_unix_nano > MAX_TIME_NS:
            return f"events[{k}].timeUnixNano is after {_MAX_TIME_TEXT} (the store's time range)"
    return _attributes_of_each(events, limits, "events", walk_values)


def _link_problem(
    links: RepeatedCompositeFieldContainer[trace_pb2.Span.Link],
    limits: SpanLimits,
    walk_values: bool,
) -> str | None:
    """A link whose trace or span id has the wrong length, or whose attributes are bad."""
    for k, link in enumerate(links):
        if len(link.trace_id) != _TRACE_ID_BYTES:
            return f"links[{k}].traceId must be {_TRACE_ID_BYTES} bytes, got {len(link.trace_id)}"
        if len(link.span_id) != _SPAN_ID_BYTES:
            return f"links[{k}].spanId must be {_SPAN_ID_BYTES} bytes, got {len(link.span_id)}"
    return _attributes_of_each(links, limits, "links", walk_values)


def _attributes_of_each(
    items: RepeatedCompositeFieldContainer[Any], limits: SpanLimits, name: str, walk_values: bool
) -> str | None:
    """The first bad attribute list of `items` (a span's events or links)."""
    for k, item in enumerate(items):
        problem = item.attributes and _attribute_problem(
            item.attributes, limits, f"{name}[{k}].attributes", walk_values
        )
        if problem:
            return problem
    return None


_KEY = attrgetter("key")


def _attribute_problem(
    attributes: RepeatedCompositeFieldContainer[KeyValue],
    limits: SpanLimits,
    field: str,
    walk: bool,
    require_keys: bool = False,
) -> str | None:
    """Too many attributes, an empty key (when `require_keys`: a span's own attributes),
    or (when `walk`) a value over the limits at any depth; `field` names the list
    ("attributes", "events[2].attributes", "resource.attributes")."""
    if len(attributes) > limits.max_attributes:
        return f"{field}: {len(attributes)} exceeds the limit of {limits.max_attributes}"
    if not walk:  # the common case: only the keys are read, in one C-level pass
        if not require_keys or all(map(_KEY, attributes)):
            return None
        empty = next(a for a, attribute in enumerate(attributes) if not attribute.key)
        return f"{field}[{empty}].key is empty"
    possibly_long = limits.max_string_value_bytes // _UTF8_MAX_BYTES_PER_CHAR
    for a, attribute in enumerate(attributes):
        if require_keys and not attribute.key:
            return f"{field}[{a}].key is empty"
        value = attribute.value
        length = len(value.string_value)
        if length:
            if length <= possibly_long:
                continue  # the common case, a short string: two field reads
        elif value.WhichOneof("value") not in _WALKED:
            continue  # a number or a boolean
        problem = _value_problem(value, limits)
        if problem is not None:
            where, reason = problem
            return f"{field}[{a}] ({attribute.key}){where}: {reason}"
    return None


_WALKED = frozenset({"bytes_value", "array_value", "kvlist_value"})


def _value_problem(value: AnyValue, limits: SpanLimits) -> tuple[str, str] | None:
    """(path inside the value, reason) of the first string or bytes over the size limit,
    at any depth; None when every part of `value` is within the limits."""
    max_bytes = limits.max_string_value_bytes
    text = value.string_value
    if text:  # the common case: one field read, and no encoding of short strings
        size = len(text.encode()) if len(text) > max_bytes // _UTF8_MAX_BYTES_PER_CHAR else 0
        return _size_problem("string", size, max_bytes)
    which = value.WhichOneof("value")
    if which == "bytes_value":
        return _size_problem("bytes", len(value.bytes_value), max_bytes)
    if which == "array_value":
        items: Iterable[tuple[str, AnyValue]] = (
            (f".arrayValue.values[{i}]", item) for i, item in enumerate(value.array_value.values)
        )
    elif which == "kvlist_value":
        items = (
            (f".kvlistValue.values[{i}] ({pair.key})", pair.value)
            for i, pair in enumerate(value.kvlist_value.values)
        )
    else:
        return None
    for where, item in items:
        problem = _value_problem(item, limits)
        if problem is not None:
            return where + problem[0], problem[1]
    return None


def _size_problem(kind: str, size: int, max_bytes: int) -> tuple[str, str] | None:
    """The reason a string or bytes value of `size` bytes is too long; None when it fits."""
    if size <= max_bytes:
        return None
    return "", f"{kind} value of {size} bytes exceeds the limit of {max_bytes}"


def validate_logs_request(
    request: ExportLogsServiceRequest,
    limits: SpanLimits = SpanLimits(),
    encoded_bytes: int | None = None,
) -> Rejections:
    """Drop invalid log records from `request` IN PLACE (and then empty scopes/resources),
    as `validate_request` does spans, under the same limits (a record's attributes as a
    span's, its body as a value); `Rejections.rejected_spans` counts the records."""
    rejections = Rejections()
    size = request.ByteSize() if encoded_bytes is None else encoded_bytes
    long_values = size > limits.max_string_value_bytes
    for r, resource_logs in enumerate(request.resource_logs):
        resource = resource_logs.resource
        resource_problem = _attribute_problem(
            resource.attributes, limits, "resource.attributes",
            walk=long_values and _larger_than_a_value(resource, limits),
        )  # fmt: skip
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            scope = scope_logs.scope
            shared_problem = resource_problem or _attribute_problem(
                scope.attributes, limits, "scope.attributes",
                walk=long_values and _larger_than_a_value(scope, limits),
            )  # fmt: skip
            records = scope_logs.log_records
            bad_indexes = []
            for i, record in enumerate(records):
                walk = long_values and _larger_than_a_value(record, limits)
                problem = shared_problem or record_problem(record, limits, walk)
                if problem is not None:
                    bad_indexes.append(i)
                    path = f"resourceLogs[{r}].scopeLogs[{s}].logRecords[{i}]"
                    rejections.add(describe_record(record, path, problem))
            _delete_indexes(records, bad_indexes)
        _delete_empty(resource_logs.scope_logs, "log_records")
    _delete_empty(request.resource_logs, "scope_logs")
    return rejections


def record_problem(
    record: logs_pb2.LogRecord, limits: SpanLimits = SpanLimits(), walk_values: bool = True
) -> str | None:
    """The first reason a log record is invalid, or None: an id of the wrong length or all
    zeros (a record may carry none; a span id needs a trace id), a time past the store's
    range, a severity number outside the enum, bad attributes, a body over the limits."""
    problem = _record_id_problem(record)
    if problem is not None:
        return problem
    for field, value in (("timeUnixNano", record.time_unix_nano),
                         ("observedTimeUnixNano", record.observed_time_unix_nano)):  # fmt: skip
        if value > MAX_TIME_NS:
            return f"{field} {value} is after {_MAX_TIME_TEXT} (the store's time range)"
    if not 0 <= record.severity_number <= _MAX_SEVERITY:
        number = record.severity_number
        return f"severityNumber {number} is not a SeverityNumber (0..{_MAX_SEVERITY})"
    attributes = _attribute_problem(record.attributes, limits, "attributes", walk_values, True)
    if attributes is not None or not walk_values or not record.HasField("body"):
        return attributes
    found = _value_problem(record.body, limits)
    return None if found is None else f"body{found[0]}: {found[1]}"


def _record_id_problem(record: logs_pb2.LogRecord) -> str | None:
    if not record.trace_id and not record.span_id:
        return None
    if not record.trace_id:
        return "spanId without a traceId"
    return _bad_id("traceId", record.trace_id, _TRACE_ID_BYTES, _ZERO_TRACE_ID) or (
        _bad_id("spanId", record.span_id, _SPAN_ID_BYTES, _ZERO_SPAN_ID) if record.span_id else None
    )


def describe_record(record: logs_pb2.LogRecord, path: str, problem: str) -> str:
    """One error line: the record by its trace and span id (when printable) and index
    path, then the problem."""
    if record.trace_id and _record_id_problem(record) is None:
        return f"log record {record.trace_id.hex()}/{record.span_id.hex()} ({path}): {problem}"
    return f"log record {path}: {problem}"


def describe_span(span: trace_pb2.Span, path: str, problem: str) -> str:
    """One error line: the span by ids (when printable) and index path, then the problem."""
    if _id_problem(span) is None:
        return span_line(span.trace_id, span.span_id, path, problem)
    return f"span {path}: {problem}"


def span_line(trace_id: bytes, span_id: bytes, path: str, problem: str) -> str:
    """One error line of a span with printable ids: its ids and index path, the problem."""
    return f"span {trace_id.hex()}/{span_id.hex()} ({path}): {problem}"


def _delete_indexes(items: RepeatedCompositeFieldContainer, indexes: list[int]) -> None:
    """Delete the elements at ascending `indexes` from a repeated field."""
    for index in reversed(indexes):
        del items[index]


def _delete_empty(items: RepeatedCompositeFieldContainer, child_field: str) -> None:
    """Delete elements of `items` whose repeated `child_field` is empty."""
    _delete_indexes(items, [i for i, item in enumerate(items) if not getattr(item, child_field)])
