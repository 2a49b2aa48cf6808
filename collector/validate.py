"""Per-span validation of an OTLP export request: keep the good spans, report the bad ones.

Runs on the protobuf hot path, so each span costs only a few cheap field reads. A bad span
never takes the good spans of its request down with it (OTLP partial success).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.schemas.model import MAX_TIME_NS

MAX_ATTRIBUTES_PER_SPAN = 1024
"""Most attributes one span may carry; a span with more is rejected."""

MAX_STRING_VALUE_BYTES = 1024 * 1024
"""Longest UTF-8 string attribute value (1 MiB) accepted on a span."""

MAX_LISTED_ERRORS = 20
"""How many bad spans the error message names before summarising the rest."""

_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8
_ZERO_TRACE_ID = bytes(_TRACE_ID_BYTES)
_ZERO_SPAN_ID = bytes(_SPAN_ID_BYTES)
_MAX_SPAN_KIND = max(trace_pb2.Span.SpanKind.values())
_MAX_STATUS_CODE = max(trace_pb2.Status.StatusCode.values())
_UTF8_MAX_BYTES_PER_CHAR = 4
_MAX_TIME_TEXT = datetime.fromtimestamp(MAX_TIME_NS // 10**9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class ValidationResult:
    """Outcome of `validate_request`: how many spans were dropped and why ("" when none)."""

    rejected_spans: int
    error_message: str


@dataclass(frozen=True, slots=True)
class SpanLimits:
    """Size limits applied to every span (defaults are the module constants)."""

    max_attributes: int = MAX_ATTRIBUTES_PER_SPAN
    max_string_value_bytes: int = MAX_STRING_VALUE_BYTES


def validate_request(
    request: ExportTraceServiceRequest, limits: SpanLimits = SpanLimits()
) -> ValidationResult:
    """Drop invalid spans from `request` IN PLACE (and then empty scopes/resources).

    Returns the number of rejected spans and a message naming each bad span by its trace and
    span id (or its index path when the ids are bad), the field and the reason.
    """
    errors: list[str] = []
    rejected = 0
    for r, resource_spans in enumerate(request.resource_spans):
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            spans = scope_spans.spans
            bad_indexes = []
            for i, span in enumerate(spans):
                problem = span_problem(span, limits)
                if problem is not None:
                    bad_indexes.append(i)
                    rejected += 1
                    if len(errors) < MAX_LISTED_ERRORS:
                        path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                        errors.append(_describe(span, path, problem))
            _delete_indexes(spans, bad_indexes)
        _delete_empty(resource_spans.scope_spans, "spans")
    _delete_empty(request.resource_spans, "scope_spans")
    return ValidationResult(rejected, _summarise(errors, rejected))


def span_problem(span: trace_pb2.Span, limits: SpanLimits = SpanLimits()) -> str | None:
    """The first reason `span` is invalid, as "field reason", or None when it is valid."""
    return _id_problem(span) or _content_problem(span, limits)


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


def _content_problem(span: trace_pb2.Span, limits: SpanLimits) -> str | None:
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
    late_event = next(
        (k for k, event in enumerate(span.events) if event.time_unix_nano > MAX_TIME_NS),
        None,
    )
    if late_event is not None:
        return (
            f"events[{late_event}].timeUnixNano is after {_MAX_TIME_TEXT} (the store's time range)"
        )
    if not 0 <= span.kind <= _MAX_SPAN_KIND:
        return f"kind {span.kind} is not a SpanKind (0..{_MAX_SPAN_KIND})"
    if not 0 <= span.status.code <= _MAX_STATUS_CODE:
        return f"status.code {span.status.code} is not a StatusCode (0..{_MAX_STATUS_CODE})"
    return _link_problem(span.links) or _attribute_problem(span.attributes, limits)


def _link_problem(links: RepeatedCompositeFieldContainer[trace_pb2.Span.Link]) -> str | None:
    """A link whose trace or span id has the wrong length."""
    for k, link in enumerate(links):
        if len(link.trace_id) != _TRACE_ID_BYTES:
            return f"links[{k}].traceId must be {_TRACE_ID_BYTES} bytes, got {len(link.trace_id)}"
        if len(link.span_id) != _SPAN_ID_BYTES:
            return f"links[{k}].spanId must be {_SPAN_ID_BYTES} bytes, got {len(link.span_id)}"
    return None


def _attribute_problem(
    attributes: RepeatedCompositeFieldContainer, limits: SpanLimits
) -> str | None:
    """Too many attributes, an empty key, or a string value over the size limit."""
    if len(attributes) > limits.max_attributes:
        return f"attributes: {len(attributes)} exceeds the limit of {limits.max_attributes}"
    max_bytes = limits.max_string_value_bytes
    possibly_long = max_bytes // _UTF8_MAX_BYTES_PER_CHAR
    for a, attribute in enumerate(attributes):
        if not attribute.key:
            return f"attributes[{a}].key is empty"
        text = attribute.value.string_value
        if len(text) > possibly_long and len(text.encode()) > max_bytes:
            return (
                f"attributes[{a}] ({attribute.key}): string value of {len(text.encode())} bytes "
                f"exceeds the limit of {max_bytes}"
            )
    return None


def _describe(span: trace_pb2.Span, path: str, problem: str) -> str:
    """One error line: the span by ids (when printable) and index path, then the problem."""
    if _id_problem(span) is None:
        return f"span {span.trace_id.hex()}/{span.span_id.hex()} ({path}): {problem}"
    return f"span {path}: {problem}"


def _delete_indexes(items: RepeatedCompositeFieldContainer, indexes: list[int]) -> None:
    """Delete the elements at ascending `indexes` from a repeated field."""
    for index in reversed(indexes):
        del items[index]


def _delete_empty(items: RepeatedCompositeFieldContainer, child_field: str) -> None:
    """Delete elements of `items` whose repeated `child_field` is empty."""
    _delete_indexes(items, [i for i, item in enumerate(items) if not getattr(item, child_field)])


def _summarise(errors: list[str], rejected: int) -> str:
    """Join the listed errors, adding "... and N more" for the ones left out."""
    if rejected > len(errors):
        errors = [*errors, f"... and {rejected - len(errors)} more"]
    return "; ".join(errors)
