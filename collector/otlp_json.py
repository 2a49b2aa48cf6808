"""OTLP/JSON trace and logs requests in, OTLP/JSON responses out.

Follows opentelemetry-proto `docs/specification.md`, "JSON Protobuf Encoding": trace and span
ids are hex strings (not base64 as in canonical protobuf JSON), enums are integers (names are
accepted too), field names are lowerCamelCase (the original snake_case is accepted too),
64-bit integers may be strings or numbers, and unknown fields are ignored.

A request is decoded span by span (a logs request record by record, `LOGS`: its records'
`traceId` and `spanId` are hex as well, and may be empty), as the protobuf path validates
it: a value no field can hold (an integer past int64 or uint64, a negative time, a double
that overflows or a bare NaN, bytes that are not base64, a lone surrogate escape
`"\\ud800"` in a key or a string, an id that is not hex, a field of the wrong JSON type)
refuses its span only, named by its ids when readable, its index path, the field and the
reason; one in a resource or scope refuses every span it carries. What cannot be decoded
at all is an `OtlpJsonError` naming the field: a body that is no JSON object, JSON nested
deeper than MAX_JSON_DEPTH containers (refused before the recursive protobuf parser sees
it) or than protobuf's 100 message levels, resourceSpans, scopeSpans or spans that are not
arrays of objects, a lone surrogate outside every resource.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

MAX_JSON_DEPTH = 256
"""Deepest nesting of JSON objects and arrays accepted. A request protobuf can represent
nests at most 100 messages deep (about 47 array or 31 key-value-list levels of an
attribute value, some 140 JSON levels); deeper JSON is refused before it is parsed."""

_TRACE_ID_HEX_LEN = 32
_SPAN_ID_HEX_LEN = 16
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_QUOTED_DOUBLE_OR_BYTES = re.compile(rb'"(?:double|bytes)_?[vV]alue"\s*:\s*"')
_DOUBLE_KEYS = frozenset({"doubleValue", "double_value"})
_BYTES_KEYS = frozenset({"bytesValue", "bytes_value"})
_NON_FINITE_SPELLINGS = frozenset({"NaN", "Infinity", "-Infinity"})
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_TOO_DEEP = "Message too deep"
_TOO_DEEP_MESSAGE = "request: values nested deeper than protobuf's 100 message levels"
_PARSE_ERROR_PREFIX = re.compile(r"^(Failed to parse \w+ field: )+")
_PARSE_ERROR_SUFFIX = re.compile(r"( at [\w.]+)?\.*$")
_LONE_SURROGATE = "a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text"


class OtlpJsonError(ValueError):
    """The body is not a valid OTLP/JSON ExportTraceServiceRequest; names the field and why."""


@dataclass(frozen=True, slots=True)
class Signal:
    """Where a signal's items sit in an OTLP/JSON request (traces and logs are built alike:
    resources, their scopes, the scopes' items), camelCase and snake_case, the request
    and response messages, what a refused item's line calls it and which of its fields
    are hex ids (of it, and of its links)."""

    resources: tuple[str, str]
    scopes: tuple[str, str]
    items: tuple[str, str]
    request: type[Message]
    response: type[Message]
    noun: str
    ids: tuple[tuple[str, str, int], ...]
    link_ids: tuple[tuple[str, str, int], ...]
    rejected_field: str

    @property
    def part_suffix(self) -> str:
        """What follows `resource` / `scope` in their holders' names ("Spans", "Logs")."""
        return self.resources[0].removeprefix("resource")


@dataclass(frozen=True, slots=True)
class RefusedSpan:
    """A span of an OTLP/JSON request that could not be decoded: its index `path`, its
    "trace/span" hex `ids` when readable, the bad field's path in the request (`location`)
    and as the span's line names it (`field`: inside the span, or `resource.` / `scope.`
    and the field there; "" for the span itself), and the reason."""

    path: str
    ids: str | None
    location: str
    field: str
    reason: str
    noun: str = "span"

    @property
    def line(self) -> str:
        """The partial-success line, as the protobuf path writes it
        (`validate.describe_span`, `describe_record`)."""
        span = f"{self.ids} ({self.path})" if self.ids else self.path
        problem = f"{self.field}: {self.reason}" if self.field else self.reason
        return f"{self.noun} {span}: {problem}"


@dataclass(slots=True)
class DecodedRequest:
    """An OTLP/JSON request decoded span by span: the spans that decoded (in `request`),
    how many spans the body held, and those refused."""

    request: Any
    spans: int = 0
    refused: list[RefusedSpan] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Problem:
    """A bad value in a resource or scope: where in the request, the field as a span's
    line names it, why."""

    location: str
    field: str
    reason: str


def parse_export_request_json(body: bytes) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON `ExportTraceServiceRequest` whole: `OtlpJsonError` naming the
    first bad field when any span cannot be decoded (the receiver decodes with
    `decode_export_request_json`, which keeps the good spans)."""
    decoded = decode_export_request_json(body)
    if decoded.refused:
        first = decoded.refused[0]
        raise OtlpJsonError(f"{first.location}: {first.reason}")
    return decoded.request


def decode_export_request_json(body: bytes, signal: Signal | None = None) -> DecodedRequest:
    """Decode an OTLP/JSON `ExportTraceServiceRequest` span by span (an
    `ExportLogsServiceRequest` record by record with `signal` LOGS; see the module's
    docstring); `OtlpJsonError` when the body cannot be decoded at all."""
    signal = signal or TRACES
    document = _load_json(body)
    if not isinstance(document, dict):
        raise OtlpJsonError(f"request: expected a JSON object, got {_json_type(document)}")
    _check_depth(document)
    checks = _ValueChecks(
        surrogates=_SURROGATE_ESCAPE.search(body) is not None,
        quoted=_QUOTED_DOUBLE_OR_BYTES.search(body) is not None,
    )
    decoded = DecodedRequest(signal.request())
    (resources_camel, resources_snake), (scopes_camel, scopes_snake) = (
        signal.resources,
        signal.scopes,
    )
    items_camel, items_snake = signal.items
    resources = _objects(document, resources_camel, resources_snake, "request", checks)
    for r, resource_items in resources:
        resource_path = f"{resources_camel}[{r}]"
        scopes = _objects(resource_items, scopes_camel, scopes_snake, resource_path, checks)
        holder = getattr(decoded.request, resources_snake).add()
        resource_problem = _decode_part(
            resource_items, signal.scopes, holder, resource_path, "resource", checks,
            signal.part_suffix,
        )  # fmt: skip
        for s, scope_items in scopes:
            scope_path = f"{resource_path}.{scopes_camel}[{s}]"
            items = _array(scope_items, items_camel, items_snake, scope_path)
            scope_holder = getattr(holder, scopes_snake).add()
            problem = resource_problem or _decode_part(
                scope_items, signal.items, scope_holder, scope_path, "scope", checks,
                signal.part_suffix,
            )  # fmt: skip
            decoded.spans += len(items)
            for i, item in enumerate(items):
                path = f"{scope_path}.{items_camel}[{i}]"
                refused = _decode_span(
                    item, getattr(scope_holder, items_snake), path, problem, checks, signal
                )
                if refused is not None:
                    decoded.refused.append(refused)
    return decoded


@dataclass(frozen=True, slots=True)
class _ValueChecks:
    """Which value walks a body needs: for lone surrogate escapes, for doubles and bytes
    written as strings (each only when the body's text shows one can be there)."""

    surrogates: bool
    quoted: bool

    @property
    def any(self) -> bool:
        return self.surrogates or self.quoted


def _decode_part(
    value: dict[str, Any],
    children: tuple[str, ...],
    holder: Message,
    path: str,
    part: str,
    checks: _ValueChecks,
    suffix: str = "Spans",
) -> _Problem | None:
    """Parse a resource's or scope's own fields (all but its `children`) into `holder`;
    the problem that refuses every span (or record) under it, or None."""
    own = {key: item for key, item in value.items() if key not in children}
    found = _value_problem(own, path, checks) or _parse_problem(own, holder, path)
    if found is None:
        return None
    location, reason = found
    inner = location[len(path) + 1 :]
    if not inner.startswith(part):  # a field beside the resource or scope (`schemaUrl`)
        inner = f"{part}{suffix}.{inner}" if inner else f"{part}{suffix}"
    return _Problem(location, inner, reason)


def _decode_span(
    span: Any,
    spans: RepeatedCompositeFieldContainer[Message],
    path: str,
    shared: _Problem | None,
    checks: _ValueChecks,
    signal: Signal,
) -> RefusedSpan | None:
    """Parse one span (or record: `signal`) into `spans`; the refusal when it (or its
    resource or scope, `shared`) holds a value no field can."""
    noun = signal.noun
    if not isinstance(span, dict):
        reason = f"expected a JSON object, got {_json_type(span)}"
        return RefusedSpan(path, None, path, "", reason, noun)
    ids = _readable_ids(span)
    if shared is not None:
        return RefusedSpan(path, ids, shared.location, shared.field, shared.reason, noun)
    found = _value_problem(span, path, checks) or _ids_problem(span, path, signal)
    if found is None:
        found = _parse_problem(span, spans.add(), path)
        if found is None:
            return None
        del spans[-1]  # parsed in part
    location, reason = found
    return RefusedSpan(path, ids, location, location[len(path) + 1 :], reason, noun)


def response_json(rejected_spans: int, error_message: str, signal: Signal | None = None) -> bytes:
    """An OTLP/JSON `ExportTraceServiceResponse` (`ExportLogsServiceResponse` with `signal`
    LOGS, counting records).

    `partialSuccess` is set only when spans were rejected or there is a message (the spec lets
    servers convey warnings with `rejectedSpans` 0); otherwise the body is `{}`.
    """
    signal = signal or TRACES
    if rejected_spans < 0:
        raise ValueError(f"rejected_spans: must be >= 0, got {rejected_spans}")
    response = signal.response()
    if rejected_spans or error_message:
        setattr(response.partial_success, signal.rejected_field, rejected_spans)
        response.partial_success.error_message = error_message
    document = json_format.MessageToDict(response)
    return json.dumps(document, separators=(",", ":")).encode()


def _load_json(body: bytes) -> Any:
    """Decode JSON, turning decoder errors into `OtlpJsonError` with line and column."""
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise OtlpJsonError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except UnicodeDecodeError as exc:
        raise OtlpJsonError(f"invalid JSON: body is not UTF-8 text ({exc.reason})") from exc
    except RecursionError as exc:
        raise OtlpJsonError(
            f"invalid JSON: nested deeper than the decoder can follow (the limit is "
            f"{MAX_JSON_DEPTH} levels)"
        ) from exc


def _objects(
    container: dict[str, Any], camel: str, snake: str, path: str, checks: _ValueChecks
) -> list[tuple[int, dict[str, Any]]]:
    """The objects of the array under `camel` (or `snake`), with their indexes; a part of
    the request's skeleton, so anything else is an `OtlpJsonError`."""
    items = _array(container, camel, snake, path)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            where = f"{path}.{camel}[{index}]".removeprefix("request.")
            raise OtlpJsonError(f"{where}: expected a JSON object, got {_json_type(item)}")
    return list(enumerate(items))


def _array(container: dict[str, Any], camel: str, snake: str, path: str) -> list[Any]:
    """The array under `camel` (or `snake`); [] when absent or null."""
    value = container.get(camel, container.get(snake))
    if value is None:
        return []
    if not isinstance(value, list):
        where = f"{path}.{camel}".removeprefix("request.")
        raise OtlpJsonError(f"{where}: expected a JSON array, got {_json_type(value)}")
    return value


def _parse_problem(value: dict[str, Any], holder: Message, path: str) -> tuple[str, str] | None:
    """Parse `value` into `holder`; (where, why) when it holds a value no field can."""
    try:
        json_format.ParseDict(value, holder, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        if _TOO_DEEP in str(exc):
            raise OtlpJsonError(_TOO_DEEP_MESSAGE) from exc
        return _locate_parse_error(value, holder.DESCRIPTOR, path)
    except (ValueError, TypeError, SystemError, RecursionError) as exc:  # inputs the parser
        return path, str(exc)  # does not turn into ParseError
    return None


def _readable_ids(span: dict[str, Any]) -> str | None:
    """ "trace/span" of a span's hex ids (lowercase), when both are well formed."""
    trace_id = span.get("traceId", span.get("trace_id"))
    span_id = span.get("spanId", span.get("span_id"))
    if _is_hex_id(trace_id, _TRACE_ID_HEX_LEN) and _is_hex_id(span_id, _SPAN_ID_HEX_LEN):
        return f"{trace_id.lower()}/{span_id.lower()}"
    return None


def _is_hex_id(value: Any, hex_len: int) -> bool:
    if not isinstance(value, str) or len(value) != hex_len or not value.isascii():
        return False
    try:
        return any(binascii.a2b_hex(value))  # an all-zero id is no id
    except ValueError:
        return False


def _ids_problem(span: dict[str, Any], path: str, signal: Signal) -> tuple[str, str] | None:
    """Convert a span's (or record's) hex ids, and its links', to base64 in place for
    ParseDict; the first id that is not hex, as (where, why)."""
    for camel, snake, hex_len in signal.ids:
        problem = _convert_id(span, camel, snake, hex_len, path)
        if problem is not None:
            return problem
    if not signal.link_ids:
        return None
    links = span.get("links", span.get("links"))
    for k, link in enumerate(links if isinstance(links, list) else ()):
        if isinstance(link, dict):
            for camel, snake, hex_len in signal.link_ids:
                problem = _convert_id(link, camel, snake, hex_len, f"{path}.links[{k}]")
                if problem is not None:
                    return problem
    return None


_SPAN_IDS = (
    ("traceId", "trace_id", _TRACE_ID_HEX_LEN),
    ("spanId", "span_id", _SPAN_ID_HEX_LEN),
    ("parentSpanId", "parent_span_id", _SPAN_ID_HEX_LEN),
)
TRACES = Signal(
    ("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans"),
    ExportTraceServiceRequest, ExportTraceServiceResponse, "span", _SPAN_IDS, _SPAN_IDS[:2],
    "rejected_spans",
)  # fmt: skip
LOGS = Signal(
    ("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"),
    ("logRecords", "log_records"), ExportLogsServiceRequest, ExportLogsServiceResponse,
    "log record", _SPAN_IDS[:2], (), "rejected_log_records",
)  # fmt: skip


def _convert_id(
    holder: dict[str, Any], camel: str, snake: str, hex_len: int, path: str
) -> tuple[str, str] | None:
    """Replace the hex id under `camel` or `snake` by its base64 form ("" stays empty);
    (where, why) when it is not a hex id."""
    key = camel if camel in holder else snake
    value = holder.get(key)
    if value is None or value == "":
        return None
    where = f"{path}.{camel}"
    if not isinstance(value, str):
        return where, f"expected a hex string, got {type(value).__name__}"
    if len(value) != hex_len:
        return where, f"expected {hex_len} hex characters, got {len(value)}"
    try:
        raw = binascii.a2b_hex(value)
    except ValueError:  # binascii.Error, or non-ASCII text
        return where, f"not a hex string: {value!r}"
    holder[key] = base64.b64encode(raw).decode("ascii")
    return None


def _value_problem(value: Any, path: str, checks: _ValueChecks) -> tuple[str, str] | None:
    """The first value of `value` ParseDict would take without a word though no field can
    hold it, as (where, why): a lone surrogate in a key or a string, a double written as
    a string that overflows, a bytes value that is not base64. Walks only what the body's
    text shows can be there (`checks`)."""
    if not checks.any:
        return None
    for where, key, item in _walk(value, path):
        if checks.surrogates and isinstance(key, str) and not _is_unicode(key):
            return where, f"a key has {_LONE_SURROGATE}"
        if not isinstance(item, str):
            continue
        if checks.surrogates and not _is_unicode(item):
            return _member(where, key), _LONE_SURROGATE
        reason = _quoted_problem(key, item) if checks.quoted else None
        if reason is not None:
            return _member(where, key), reason
    return None


def _walk(value: Any, path: str) -> Iterator[tuple[str, str | int, Any]]:
    """(path of the container, key or index, item) of every member of `value`, at any
    depth (the depth was bounded before)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        container, where = stack.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            yield where, key, item
            if isinstance(item, (dict, list)):
                stack.append((item, _member(where, key)))


def _member(path: str, key: str | int) -> str:
    """The path of a member of the container at `path`: `.key` or `[index]`."""
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def _quoted_problem(key: str | int, text: str) -> str | None:
    """Why a string under a double or bytes key is no value of it; None when it is one
    (or the key is another)."""
    if key in _DOUBLE_KEYS:
        try:
            number = float(text)
        except ValueError:
            return None  # ParseDict names it ("Couldn't parse float")
        if not math.isfinite(number) and text not in _NON_FINITE_SPELLINGS:
            return f"{text[:40]!r} is out of the range of a double"
    elif key in _BYTES_KEYS:
        stripped = text.strip()
        if not _BASE64.fullmatch(stripped) or len(stripped.rstrip("=")) % 4 == 1:
            return f"not base64: {text[:40]!r}"
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _check_depth(document: dict[str, Any]) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH, naming where."""
    stack: list[tuple[Any, int, _Where]] = [(document, 1, None)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise OtlpJsonError(f"{_path(where)}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        for key, item in items:
            if isinstance(item, (dict, list)):
                stack.append((item, depth + 1, (where, key)))


_Where = tuple[Any, str | int] | None  # (parent, key or index), built only as walked


def _path(where: _Where, shown: int = 12) -> str:
    """The JSON path of a walked position, e.g. `resourceSpans[0].scopeSpans[1]` (its
    first `shown` steps, then "..."); "request" for the root."""
    parts: list[str] = []
    while where is not None:
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    parts.reverse()
    path = "".join(parts[:shown]) + ("..." if len(parts) > shown else "")
    return path.lstrip(".") or "request"


def _locate_parse_error(value: Any, descriptor: Descriptor, path: str) -> tuple[str, str]:
    """Re-parse failing `value` field by field to find the innermost bad field, as
    (where, why). Only runs after ParseDict failed, so its cost is off the happy path."""
    if not isinstance(value, dict):
        return path, f"expected a JSON object, got {_json_type(value)}"
    message_class = GetMessageClass(descriptor)
    for key, item in value.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        if field is None or _parse_failure(message_class, {key: item}) is None:
            continue
        field_path = f"{path}.{field.json_name}" if path else field.json_name
        return _locate_in_field(field, item, field_path, message_class, key)
    return path, _parse_failure(message_class, value) or "invalid value"


def _locate_in_field(
    field: FieldDescriptor, item: Any, field_path: str, message_class: type[Message], key: str
) -> tuple[str, str]:
    """Narrow a failing field down to its bad element (repeated) or sub-field (message)."""
    if field.is_repeated:
        if not isinstance(item, list):
            return field_path, f"expected a JSON array, got {_json_type(item)}"
        bad = next(
            (i for i, e in enumerate(item) if _parse_failure(message_class, {key: [e]})), None
        )
        if bad is not None:
            field_path, item = f"{field_path}[{bad}]", item[bad]
            value: dict[str, Any] = {key: [item]}
        else:
            value = {key: item}
    else:
        value = {key: item}
    if field.type == FieldDescriptor.TYPE_MESSAGE and not isinstance(item, list):
        return _locate_parse_error(item, field.message_type, field_path)
    return field_path, _parse_failure(message_class, value) or "invalid value"


def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (object, array, string, number, ...)."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


def _parse_failure(message_class: type[Message], value: Any) -> str | None:
    """The cleaned-up ParseError reason for `value`, or None when ParseDict accepts it."""
    try:
        json_format.ParseDict(value, message_class(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        return _reason(exc)
    except (ValueError, TypeError, SystemError, RecursionError) as exc:
        return str(exc) or type(exc).__name__
    return None


def _reason(error: json_format.ParseError) -> str:
    """The innermost reason of a ParseError, without the 'Failed to parse X field:' chain."""
    reason = _PARSE_ERROR_SUFFIX.sub("", _PARSE_ERROR_PREFIX.sub("", str(error)))
    return reason or "invalid value"
