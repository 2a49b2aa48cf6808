"""Decode OTLP protobuf traces into canonical spans (the reader side of `pathgrade.spans`).

Ids become lowercase hex (an absent parent becomes ""), kinds and status codes become the
strings of the OTel Collector's `otel_traces` table, `Span.flags` stays a number (bits 8-9
say whether the parent is remote: `Span.parent_is_remote`), attribute values keep their
OTLP types (str, bool, int, float, bytes, list, dict). Each span gets its GenAI view from
`conventions.genai_fields` and its evaluation context from `conventions.eval_context`. A
span whose status is Error and that has no `error.type` gets `genai.error_type = "_OTHER"`,
the GenAI convention's fallback value, so every failed span has an error type.

Spans of one resource share one `resource_attributes` dict: treat it as read-only.

A message value is read by the OTLP reader (`_otlp_reader`, a C extension built at
install) in one pass over its bytes, which gives each span's parts as Python objects;
bytes it does not read exactly as upb would (malformed ones, invalid UTF-8, a message
field present twice, values nested deep, ...) and an install without the extension are
parsed by upb and walked here (`decode_resource_spans`) into the reader's shape. Both
build spans with `_decode_read` and give the same spans
(tests/unit/content/test_otlp_reader.py). The reader gives a short ASCII string or an id
it read before (a key, a name, a method, a trace's id) as the same str object.

Decoding is total past the protobuf parse: a span whose GenAI view or evaluation context
cannot be read keeps its ids, times and attributes (the typed GenAI columns stay empty),
and unreadable tenant or receive-time headers fall back to their defaults; each case is
counted in the caller's `DecodeProblems` and logged, and never drops the spans around it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, TracesData
from pathgrade.content.conventions import EVAL_KEYS, eval_context, genai_fields
from pathgrade.content.numbers import parse_int
from pathgrade.schemas import genai
from pathgrade.schemas.decline import Decision, Declined, declined
from pathgrade.schemas.genai_mapping import TOKEN_KEYS
from pathgrade.schemas.model import (
    MAX_TIME_NS,
    SPAN_KINDS,
    STATUS_CODES,
    EvalContext,
    GenAIFields,
    Span,
    SpanEvent,
    SpanLink,
)
from pathgrade.schemas.topics import DEFAULT_TENANT, RECEIVED_AT_HEADER, TENANT_HEADER

try:
    from pathgrade.content._otlp_reader import messages_json, read_logs, read_traces, read_value
except ImportError:  # installed without a C compiler: every message parsed by upb
    messages_json = read_logs = read_traces = read_value = None

log = logging.getLogger(__name__)


def reader_built() -> bool:
    """Whether the OTLP reader extension is there (else every value goes through upb)."""
    return read_traces is not None


# OTLP enum numbers (Span.SpanKind, Status.StatusCode) -> otel_traces strings. Numbers
# outside the enum (proto3 enums are open) read as Unspecified / Unset.
_SPAN_KINDS = dict(enumerate(SPAN_KINDS))
_STATUS_CODES = dict(enumerate(STATUS_CODES))
_UNSPECIFIED, _UNSET, _ERROR = SPAN_KINDS[0], STATUS_CODES[0], STATUS_CODES[2]


@dataclass
class DecodeProblems:
    """What decoding left out, counted where it happened (the spans themselves are kept)."""

    partly_decoded_spans: int = 0
    """Spans whose GenAI view or evaluation context raised: kept with those fields empty."""
    unreadable_headers: int = 0
    """Messages whose tenant or receive-time header was unreadable: defaults were used."""


def any_value(value: AnyValue) -> Any:
    """The Python value of an OTLP AnyValue (recursively for arrays and key-value lists)."""
    text = value.string_value  # most values: a non-empty string (no oneof lookup)
    if text:
        return text
    which = value.WhichOneof("value")
    if which in _SCALAR_FIELDS:
        return getattr(value, which)
    if which == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_dict(value.kvlist_value.values)
    return None


def structured_value(value: AnyValue) -> Any:
    """`any_value` of a value, an array or a key-value list read by the OTLP reader from its
    bytes (one pass in C instead of a walk here) where it reads them as upb does."""
    text = value.string_value  # most values: a non-empty string (no oneof lookup)
    if text:
        return text
    if read_value is not None and value.WhichOneof("value") in _STRUCTURED_FIELDS:
        read = read_value(value.SerializeToString())
        if read is not None:
            return read[0]
    return any_value(value)


_STRUCTURED_FIELDS = frozenset({"array_value", "kvlist_value"})


def attributes_dict(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    """OTLP key-values as a dict; a repeated key keeps its last value, as the SDK does."""
    result: dict[str, Any] = {}
    for key_value in key_values:
        value = key_value.value
        # Scalars inline: this loop is the hottest of the decoder. Most values are strings:
        # a non-empty one is read without asking the oneof which field is set.
        text = value.string_value
        if text:
            result[key_value.key] = text
            continue
        which = value.WhichOneof("value")
        result[key_value.key] = (
            getattr(value, which) if which in _SCALAR_FIELDS else any_value(value)
        )
    return result


_SCALAR_FIELDS = frozenset(
    {"string_value", "bool_value", "int_value", "double_value", "bytes_value"}
)


def decode_resource_spans(
    resource_spans: Iterable[ResourceSpans],
    tenant: str,
    received_at_ns: int,
    problems: DecodeProblems | None = None,
) -> list[Span]:
    """Canonical spans of OTLP ResourceSpans, in the order they appear; what could not be
    read is counted in `problems`. Their parts are walked into `read_traces`' shape, which
    `_decode_read` makes spans of."""
    return _decode_read(
        [_resource_parts(resource_span) for resource_span in resource_spans],
        tenant, received_at_ns, problems,
    )  # fmt: skip


def _resource_parts(resource_span: ResourceSpans) -> tuple[dict[str, Any], list[tuple]]:
    """A ResourceSpans as `read_traces` reads one (content/_otlp_reader.c's top comment)."""
    scopes = []
    for scope_span in resource_span.scope_spans:
        parts = []
        for span in scope_span.spans:
            status = span.status
            events, links = span.events, span.links  # most spans have neither
            parts.append((
                span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), span.name,
                span.kind, span.start_time_unix_nano, span.end_time_unix_nano,
                span.trace_state, attributes_dict(span.attributes), status.code,
                status.message, _events(events) if events else None,
                _links(links) if links else None, span.flags,
            ))  # fmt: skip
        scopes.append((scope_span.scope.name, scope_span.scope.version, parts))
    return attributes_dict(resource_span.resource.attributes), scopes


def _decode_read(
    resources: list, tenant: str, received_at_ns: int, problems: DecodeProblems | None
) -> list[Span]:
    """Canonical spans of a message value as `read_traces` read it (the shape is in
    content/_otlp_reader.c's top comment), in the order they appear: ids as hex, kind and
    status code as their enum numbers, each span with its GenAI view and evaluation
    context. A span that names no GenAI operation, holds no key either view reads and did
    not fail (three in four of bench/ingest.py's realistic mix: HTTP and database spans)
    gets the empty views at once, without a call per span."""
    spans: list[Span] = []
    append = spans.append
    for resource_attributes, scopes in resources:
        service_name = service_name_of(resource_attributes)
        for scope_name, scope_version, parts in scopes:
            for (
                trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns, trace_state,
                attributes, status_code, status_message, events, links, flags,
            ) in parts:  # fmt: skip
                status = _STATUS_CODES.get(status_code, _UNSET)
                if (
                    status != _ERROR
                    and _VIEW_KEYS.isdisjoint(attributes)
                    and name.partition(" ")[0] not in genai.OPERATIONS
                ):
                    fields, context = GenAIFields(), EvalContext()
                else:
                    fields, context = _views(trace_id, span_id, name, attributes, problems)
                    if status == _ERROR and not fields.error_type:
                        fields.error_type = genai.ERROR_TYPE_OTHER
                append(Span(  # positional, in `Span`'s field order: a third of keywords' cost
                    tenant, trace_id, span_id, parent_span_id, name,
                    _SPAN_KINDS.get(kind, _UNSPECIFIED), start_ns, end_ns, service_name,
                    trace_state, resource_attributes, scope_name, scope_version, attributes,
                    status, status_message, [SpanEvent(*e) for e in events] if events else [],
                    [SpanLink(*k) for k in links] if links else [], fields, context,
                    received_at_ns, flags,
                ))  # fmt: skip
    return spans


def service_name_of(resource_attributes: dict[str, Any]) -> str:
    """A resource's `service.name` as text ("" when it has none)."""
    service_name = resource_attributes.get(genai.SERVICE_NAME, "")
    return service_name if isinstance(service_name, str) else str(service_name)


def _events(events: Iterable[trace_pb2.Span.Event]) -> list[tuple]:
    return [(e.time_unix_nano, e.name, attributes_dict(e.attributes)) for e in events]


def _links(links: Iterable[trace_pb2.Span.Link]) -> list[tuple]:
    return [
        (link.trace_id.hex(), link.span_id.hex(), link.trace_state,
         attributes_dict(link.attributes))
        for link in links
    ]  # fmt: skip


class _KeysRead(dict):
    """An empty mapping that records every key looked up in it."""

    def __init__(self) -> None:
        super().__init__()
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return default

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return False


def _keys_genai_fields_reads() -> frozenset[str]:
    """Every attribute key `genai_fields` reads of a span whose name names no operation and
    whose attributes hold none of these keys: recorded by calling it on an empty mapping,
    so the set follows the function. Such a span (an HTTP or database span, say) reads as
    the empty view, which `_views` then skips computing."""
    keys = _KeysRead()
    genai_fields("", keys)
    return frozenset(keys.read) | TOKEN_KEYS  # read behind a test an empty mapping skips


_GENAI_KEYS = _keys_genai_fields_reads()
_VIEW_KEYS = _GENAI_KEYS | EVAL_KEYS
"""Every key either view reads of a span that names no operation (`_decode_read`)."""


def _views(
    trace_id: str,
    span_id: str,
    name: str,
    attributes: dict[str, Any],
    problems: DecodeProblems | None,
) -> tuple[GenAIFields, EvalContext]:
    """The GenAI view and evaluation context of a span (named `name`, its attributes
    decoded as `attributes`); empty ones (counted, logged) when reading them raises, so a
    value no convention foresaw costs those fields, not the span. A span with no key
    `genai_fields` reads and no operation in its name gets the empty view at once (a
    quarter fewer instructions decoding bench/ingest.py's realistic mix)."""
    try:
        named_operation = name.partition(" ")[0] in genai.OPERATIONS
        if not named_operation and _GENAI_KEYS.isdisjoint(attributes):
            return GenAIFields(), eval_context(attributes)
        return genai_fields(name, attributes), eval_context(attributes)
    except Exception as exc:  # any conversion of any attribute: the span is kept regardless
        if problems is not None:
            problems.partly_decoded_spans += 1
        log.warning(
            "span %s/%s: GenAI fields left empty, its attributes could not be read: %r",
            trace_id, span_id, exc,
        )  # fmt: skip
        return GenAIFields(), EvalContext()


def decode_spans_message(
    value: bytes, tenant: str, received_at_ns: int, problems: DecodeProblems | None = None
) -> list[Span]:
    """Canonical spans of a `pathgrade.spans` message value.

    The value is an OTLP `TracesData` or `ExportTraceServiceRequest`; both hold
    `resource_spans` as field 1, so one parser reads either. Raises ValueError on bytes
    that are not such a message (the only input that costs a message's spans).
    """
    spans = read_spans_message(value, tenant, received_at_ns, problems)
    if not declined(spans):
        return spans  # type: ignore[return-value]
    # no reader, or bytes it leaves to upb: malformed ones raise here
    traces = parse_spans_message(value)
    return decode_resource_spans(traces.resource_spans, tenant, received_at_ns, problems)


READER_NOT_BUILT = Declined("the OTLP reader is not built")
LEFT_TO_UPB = Declined("bytes the reader does not read exactly as upb")
"""The OTLP reader's declines (`read_spans_message`): upb decides those messages."""


def read_spans_message(
    value: bytes, tenant: str, received_at_ns: int, problems: DecodeProblems | None = None
) -> Decision[list[Span]]:
    """`decode_spans_message` by the OTLP reader alone: the spans, or `READER_NOT_BUILT` /
    `LEFT_TO_UPB` (`schemas.decline`)."""
    if read_traces is None:
        return READER_NOT_BUILT
    resources = read_traces(value)
    if resources is None:
        return LEFT_TO_UPB
    return _decode_read(resources, tenant, received_at_ns, problems)


def parse_spans_message(value: bytes) -> TracesData:
    """A `pathgrade.spans` message value parsed (TracesData reads an
    ExportTraceServiceRequest too); raises ValueError on bytes that are not such a message."""
    traces = TracesData()
    try:
        traces.ParseFromString(value)
    except DecodeError as error:
        raise ValueError(f"pathgrade.spans message value: not OTLP TracesData: {error}") from error
    return traces


def decode_kafka_message(message: Any, problems: DecodeProblems | None = None) -> list[Span]:
    """Canonical spans of one `pathgrade.spans` Kafka message (value and headers); raises
    ValueError when its value is not OTLP TracesData."""
    tenant, received_at = message_tenant_and_time(message, problems)
    return decode_spans_message(message.value, tenant, received_at, problems)


def message_tenant_and_time(
    message: Any, problems: DecodeProblems | None = None
) -> tuple[str, int]:
    """Tenant and receive time (ns) of a `pathgrade.spans` Kafka message, from its headers;
    defaults for foreign producers (an OTel Collector's Kafka exporter sets neither). A
    tenant that is not UTF-8 is read with replacement characters; a receive time that is
    not a time the store holds falls back to the message's timestamp (both counted)."""
    tenant, received_at = DEFAULT_TENANT, 0
    unreadable = False
    for key, value in message.headers or ():
        if key == TENANT_HEADER:
            try:
                tenant = value.decode()
            except UnicodeDecodeError:
                tenant, unreadable = value.decode("utf-8", "replace"), True
        elif key == RECEIVED_AT_HEADER:
            number = parse_int(value.decode("ascii", "replace"))
            if number is not None and 0 < number <= MAX_TIME_NS:
                received_at = number
            else:
                unreadable = True
    if unreadable and problems is not None:
        problems.unreadable_headers += 1
    return tenant, received_at or _timestamp_ns(message.timestamp)


def _timestamp_ns(timestamp_ms: int | None) -> int:
    """A Kafka message timestamp (ms; -1 or None when absent) in ns, 0 outside the store's
    time range."""
    nanoseconds = (timestamp_ms or 0) * 1_000_000
    return nanoseconds if 0 < nanoseconds <= MAX_TIME_NS else 0
