"""OTLP/JSON trace requests in, OTLP/JSON responses out.

Follows opentelemetry-proto `docs/specification.md`, "JSON Protobuf Encoding": trace and span
ids are hex strings (not base64 as in canonical protobuf JSON), enums are integers (names are
accepted too), field names are lowerCamelCase (the original snake_case is accepted too),
64-bit integers may be strings or numbers, and unknown fields are ignored.

Every malformed body is an `OtlpJsonError` naming the field: JSON nested deeper than
MAX_JSON_DEPTH containers (refused before the recursive protobuf parser sees it) or than
protobuf's 100 message levels, strings with a lone surrogate escape ("\\ud800", which is
no Unicode text), non-hex or non-ASCII ids.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
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
_TOO_DEEP = "Message too deep"
_PARSE_ERROR_PREFIX = re.compile(r"^(Failed to parse \w+ field: )+")
_PARSE_ERROR_SUFFIX = re.compile(r"( at [\w.]+)?\.*$")


class OtlpJsonError(ValueError):
    """The body is not a valid OTLP/JSON ExportTraceServiceRequest; names the field and why."""


def parse_export_request_json(body: bytes) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON `ExportTraceServiceRequest` body, raising `OtlpJsonError` if invalid."""
    document = _load_json(body)
    if not isinstance(document, dict):
        raise OtlpJsonError(f"request: expected a JSON object, got {_json_type(document)}")
    _check_document(document, check_text=_SURROGATE_ESCAPE.search(body) is not None)
    _hex_ids_to_base64(document)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        if _TOO_DEEP in str(exc):
            raise OtlpJsonError(
                "request: values nested deeper than protobuf's 100 message levels"
            ) from exc
        raise OtlpJsonError(_locate_parse_error(document, request.DESCRIPTOR, "")) from exc
    except (ValueError, TypeError, SystemError, RecursionError) as exc:  # inputs the parser
        raise OtlpJsonError(f"request: {exc}") from exc  # does not turn into ParseError
    return request


def response_json(rejected_spans: int, error_message: str) -> bytes:
    """An OTLP/JSON `ExportTraceServiceResponse`.

    `partialSuccess` is set only when spans were rejected or there is a message (the spec lets
    servers convey warnings with `rejectedSpans` 0); otherwise the body is `{}`.
    """
    if rejected_spans < 0:
        raise ValueError(f"rejected_spans: must be >= 0, got {rejected_spans}")
    response = ExportTraceServiceResponse()
    if rejected_spans or error_message:
        response.partial_success.rejected_spans = rejected_spans
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


def _check_document(document: dict[str, Any], check_text: bool) -> None:
    """Refuse JSON nested deeper than MAX_JSON_DEPTH and, when `check_text` (the body has
    a surrogate escape), keys or strings that are not Unicode text; names where."""
    stack: list[tuple[Any, int, _Where]] = [(document, 1, None)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            items: Any = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            if check_text and isinstance(value, str) and not _is_unicode(value):
                raise OtlpJsonError(f"{_path(where)}: {_LONE_SURROGATE}")
            continue
        if depth > MAX_JSON_DEPTH:
            raise OtlpJsonError(f"{_path(where)}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        for key, item in items:
            if check_text and isinstance(key, str) and not _is_unicode(key):
                raise OtlpJsonError(f"{_path(where)}: a key has {_LONE_SURROGATE}")
            stack.append((item, depth + 1, (where, key)))


_Where = tuple[Any, str | int] | None  # (parent, key or index), built only as walked
_LONE_SURROGATE = "a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text"


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


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


def _items(container: dict[str, Any], camel: str, snake: str) -> list[Any]:
    """The list under `camel` (or `snake`) in `container`; [] when absent or not a list."""
    value = container.get(camel, container.get(snake))
    return value if isinstance(value, list) else []


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """Rewrite every hex trace/span id in `document` to base64, in place, for ParseDict."""
    for r, resource_spans in enumerate(_items(document, "resourceSpans", "resource_spans")):
        if not isinstance(resource_spans, dict):
            continue
        for s, scope_spans in enumerate(_items(resource_spans, "scopeSpans", "scope_spans")):
            if not isinstance(scope_spans, dict):
                continue
            for i, span in enumerate(_items(scope_spans, "spans", "spans")):
                if not isinstance(span, dict):
                    continue
                path = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                _convert_ids(span, path, parent=True)
                for k, link in enumerate(_items(span, "links", "links")):
                    if isinstance(link, dict):
                        _convert_ids(link, f"{path}.links[{k}]", parent=False)


def _convert_ids(holder: dict[str, Any], path: str, *, parent: bool) -> None:
    """Convert the traceId, spanId (and parentSpanId when `parent`) of one span or link."""
    _convert_id(holder, "traceId", "trace_id", _TRACE_ID_HEX_LEN, path)
    _convert_id(holder, "spanId", "span_id", _SPAN_ID_HEX_LEN, path)
    if parent:
        _convert_id(holder, "parentSpanId", "parent_span_id", _SPAN_ID_HEX_LEN, path)


def _convert_id(holder: dict[str, Any], camel: str, snake: str, hex_len: int, path: str) -> None:
    """Replace the hex id under `camel` or `snake` by its base64 form; "" stays empty."""
    key = camel if camel in holder else snake
    value = holder.get(key)
    if value is None or value == "":
        return
    field_path = f"{path}.{camel}"
    if not isinstance(value, str):
        raise OtlpJsonError(f"{field_path}: expected a hex string, got {type(value).__name__}")
    if len(value) != hex_len:
        raise OtlpJsonError(f"{field_path}: expected {hex_len} hex characters, got {len(value)}")
    try:
        raw = binascii.a2b_hex(value)
    except ValueError as exc:  # binascii.Error, or non-ASCII text
        raise OtlpJsonError(f"{field_path}: not a hex string: {value!r}") from exc
    holder[key] = base64.b64encode(raw).decode("ascii")


def _locate_parse_error(value: Any, descriptor: Descriptor, path: str) -> str:
    """Re-parse failing `value` field by field to find the innermost bad field and why.

    Only runs after ParseDict failed, so its cost is off the happy path.
    """
    where = path or "request"
    if not isinstance(value, dict):
        return f"{where}: expected a JSON object, got {_json_type(value)}"
    message_class = GetMessageClass(descriptor)
    for key, item in value.items():
        field = descriptor.fields_by_camelcase_name.get(key) or descriptor.fields_by_name.get(key)
        if field is None or _parse_failure(message_class, {key: item}) is None:
            continue
        field_path = f"{path}.{field.json_name}" if path else field.json_name
        return _locate_in_field(field, item, field_path, message_class, key)
    return f"{where}: {_parse_failure(message_class, value) or 'invalid value'}"


def _locate_in_field(
    field: FieldDescriptor, item: Any, field_path: str, message_class: type[Message], key: str
) -> str:
    """Narrow a failing field down to its bad element (repeated) or sub-field (message)."""
    if field.is_repeated:
        if not isinstance(item, list):
            return f"{field_path}: expected a JSON array, got {_json_type(item)}"
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
    return f"{field_path}: {_parse_failure(message_class, value) or 'invalid value'}"


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
    return None


def _reason(error: json_format.ParseError) -> str:
    """The innermost reason of a ParseError, without the 'Failed to parse X field:' chain."""
    reason = _PARSE_ERROR_SUFFIX.sub("", _PARSE_ERROR_PREFIX.sub("", str(error)))
    return reason or "invalid value"
