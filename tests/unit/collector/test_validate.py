"""Tests for collector.validate: per-span checks, in-place filtering and the error message."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.collector.validate import (
    MAX_ATTRIBUTES_PER_SPAN,
    MAX_LISTED_ERRORS,
    MAX_STRING_VALUE_BYTES,
    SpanLimits,
    validate_request,
)

TRACE_ID = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")


def _span(index: int = 1, **fields: Any) -> trace_pb2.Span:
    values: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": index.to_bytes(8, "big"),
        "name": f"span {index}",
        "start_time_unix_nano": 1_000,
        "end_time_unix_nano": 2_000,
        **fields,
    }
    return trace_pb2.Span(**values)


def _request(*scopes: list[trace_pb2.Span]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    for spans in scopes:
        resource_spans.scope_spans.add().spans.extend(spans)
    return request


def _names(request: ExportTraceServiceRequest) -> list[str]:
    return [
        span.name
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def test_valid_request_is_untouched() -> None:
    request = _request([_span(1), _span(2, parent_span_id=(1).to_bytes(8, "big"))])
    before = request.SerializeToString()
    result = validate_request(request)
    assert (result.rejected_spans, result.error_message) == (0, "")
    assert request.SerializeToString() == before


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"trace_id": TRACE_ID[:15]}, "traceId must be 16 bytes, got 15"),
        ({"trace_id": bytes(16)}, "traceId is all zeros"),
        ({"span_id": b"\x01" * 7}, "spanId must be 8 bytes, got 7"),
        ({"span_id": bytes(8)}, "spanId is all zeros"),
        ({"parent_span_id": b"\x01" * 9}, "parentSpanId must be 8 bytes, got 9"),
        ({"parent_span_id": bytes(8)}, "parentSpanId is all zeros"),
    ],
)
def test_bad_ids_are_named_by_index_path(fields: dict[str, Any], reason: str) -> None:
    request = _request([_span(1), _span(2, **fields)])
    result = validate_request(request)
    assert result.rejected_spans == 1
    assert result.error_message == f"span resourceSpans[0].scopeSpans[0].spans[1]: {reason}"
    assert _names(request) == ["span 1"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"name": "  "}, "name is empty"),
        ({"start_time_unix_nano": 0}, "startTimeUnixNano is 0"),
        ({"end_time_unix_nano": 0}, "endTimeUnixNano is 0"),
        ({"end_time_unix_nano": 999}, "endTimeUnixNano before startTimeUnixNano"),
        (
            {"end_time_unix_nano": 2**63},
            f"endTimeUnixNano {2**63} is after 2262-04-11T23:47:16Z (the store's time range)",
        ),
        (
            {"events": [trace_pb2.Span.Event(time_unix_nano=2**64 - 1, name="e")]},
            "events[0].timeUnixNano is after 2262-04-11T23:47:16Z (the store's time range)",
        ),
        ({"kind": 6}, "kind 6 is not a SpanKind (0..5)"),
        ({"status": trace_pb2.Status(code=3)}, "status.code 3 is not a StatusCode (0..2)"),
        (
            {"links": [trace_pb2.Span.Link(trace_id=TRACE_ID, span_id=b"\x01")]},
            "links[0].spanId must be 8 bytes, got 1",
        ),
        (
            {"links": [trace_pb2.Span.Link(trace_id=b"", span_id=b"\x01" * 8)]},
            "links[0].traceId must be 16 bytes, got 0",
        ),
        (
            {"attributes": [KeyValue(key="", value=AnyValue(int_value=1))]},
            "attributes[0].key is empty",
        ),
    ],
)
def test_bad_content_is_named_by_ids_and_path(fields: dict[str, Any], reason: str) -> None:
    request = _request([_span(1)], [_span(7), _span(3, **fields)])
    result = validate_request(request)
    assert result.rejected_spans == 1
    where = "(resourceSpans[0].scopeSpans[1].spans[1])"
    assert result.error_message.startswith(
        f"span {TRACE_ID.hex()}/0000000000000003 {where}: {reason}"
    )
    assert _names(request) == ["span 1", "span 7"]


def test_end_equal_to_start_is_valid() -> None:
    request = _request([_span(1, end_time_unix_nano=1_000)])
    assert validate_request(request).rejected_spans == 0


def test_attribute_count_limit() -> None:
    attributes = [KeyValue(key=f"k{i}", value=AnyValue(int_value=i)) for i in range(5)]
    limits = SpanLimits(max_attributes=4)
    request = _request([_span(1, attributes=attributes), _span(2, attributes=attributes[:4])])
    result = validate_request(request, limits)
    assert result.rejected_spans == 1
    assert "attributes: 5 exceeds the limit of 4" in result.error_message
    assert _names(request) == ["span 2"]


def test_string_value_limit_counts_utf8_bytes() -> None:
    limits = SpanLimits(max_string_value_bytes=8)
    fits = KeyValue(key="ok", value=AnyValue(string_value="abcdefgh"))
    too_long = KeyValue(key="big", value=AnyValue(string_value="ééééé"))  # 5 chars, 10 bytes
    request = _request([_span(1, attributes=[fits]), _span(2, attributes=[too_long])])
    result = validate_request(request, limits)
    assert result.rejected_spans == 1
    assert "attributes[0] (big): string value of 10 bytes exceeds the limit of 8" in (
        result.error_message
    )


def test_default_limits_are_documented_constants() -> None:
    assert SpanLimits() == SpanLimits(MAX_ATTRIBUTES_PER_SPAN, MAX_STRING_VALUE_BYTES)
    assert (MAX_ATTRIBUTES_PER_SPAN, MAX_STRING_VALUE_BYTES) == (1024, 1024 * 1024)


def test_empty_scopes_and_resources_are_removed() -> None:
    request = _request([_span(1, name="")], [_span(2)])
    request.resource_spans.add().scope_spans.add().spans.append(_span(3, span_id=bytes(8)))
    result = validate_request(request)
    assert result.rejected_spans == 2
    assert len(request.resource_spans) == 1
    assert len(request.resource_spans[0].scope_spans) == 1
    assert _names(request) == ["span 2"]


def test_all_bad_leaves_an_empty_request() -> None:
    request = _request([_span(1, name="")])
    assert validate_request(request).rejected_spans == 1
    assert len(request.resource_spans) == 0


def test_message_lists_at_most_twenty_then_summarises() -> None:
    bad = [_span(i, start_time_unix_nano=0) for i in range(1, 26)]
    request = _request([_span(100), *bad])
    result = validate_request(request)
    assert result.rejected_spans == 25
    parts = result.error_message.split("; ")
    assert len(parts) == MAX_LISTED_ERRORS + 1
    assert parts[-1] == "... and 5 more"
    assert parts[0].endswith("(resourceSpans[0].scopeSpans[0].spans[1]): startTimeUnixNano is 0")
    assert _names(request) == ["span 100"]


def _nested(leaf: AnyValue, *levels: str) -> AnyValue:
    """`leaf` wrapped in arrays ("a") and key-value lists ("k"), innermost last."""
    value = leaf
    for level in reversed(levels):
        outer = AnyValue()
        if level == "a":
            outer.array_value.values.extend([AnyValue(string_value="ok"), value])
        else:
            outer.kvlist_value.values.extend([KeyValue(key="inner", value=value)])
        value = outer
    return value


LONG = AnyValue(string_value="é" * 5)  # 10 bytes
LONG_BYTES = AnyValue(bytes_value=b"\0" * 9)


@pytest.mark.parametrize(
    ("place", "where"),
    [
        ("attributes", "attributes[0] (v).arrayValue.values[1].kvlistValue.values[0] (inner)"),
        ("event", "events[0].attributes[0] (v).arrayValue.values[1].kvlistValue.values[0] (inner)"),
        ("link", "links[0].attributes[0] (v).arrayValue.values[1].kvlistValue.values[0] (inner)"),
    ],
)
def test_value_limit_holds_at_every_depth_of_a_span(place: str, where: str) -> None:
    limits = SpanLimits(max_string_value_bytes=8)
    attribute = KeyValue(key="v", value=_nested(LONG, "a", "k"))
    fields: dict[str, Any] = {
        "attributes": {"attributes": [attribute]},
        "event": {"events": [trace_pb2.Span.Event(time_unix_nano=1, attributes=[attribute])]},
        "link": {
            "links": [
                trace_pb2.Span.Link(trace_id=TRACE_ID, span_id=b"\1" * 8, attributes=[attribute])
            ]
        },
    }[place]
    request = _request([_span(1, **fields), _span(2)])
    result = validate_request(request, limits)
    assert result.rejected_spans == 1
    assert f"{where}: string value of 10 bytes exceeds the limit of 8" in result.error_message
    assert _names(request) == ["span 2"]


def test_bytes_values_have_the_same_limit() -> None:
    limits = SpanLimits(max_string_value_bytes=8)
    attribute = KeyValue(key="blob", value=_nested(LONG_BYTES, "k"))
    result = validate_request(_request([_span(1, attributes=[attribute])]), limits)
    assert "attributes[0] (blob).kvlistValue.values[0] (inner): bytes value of 9 bytes" in (
        result.error_message
    )


def test_a_bad_resource_or_scope_refuses_the_spans_it_carries() -> None:
    limits = SpanLimits(max_string_value_bytes=8)
    request = _request([_span(1), _span(2)], [_span(3)])
    request.resource_spans[0].scope_spans[1].scope.attributes.add(key="s", value=LONG)
    other = request.resource_spans.add()
    other.resource.attributes.add(key="host", value=_nested(LONG, "a"))
    other.scope_spans.add().spans.append(_span(4))
    result = validate_request(request, limits)
    assert result.rejected_spans == 2
    assert "spans[0]): scope.attributes[0] (s): string value of 10 bytes" in result.error_message
    assert "resource.attributes[0] (host).arrayValue.values[1]: string" in result.error_message
    assert _names(request) == ["span 1", "span 2"]


def test_event_and_resource_attributes_may_have_empty_keys() -> None:
    """Only a span's own attribute keys must be non-empty (as before): the rest is left as
    sent, within the size limits."""
    event = trace_pb2.Span.Event(time_unix_nano=1, attributes=[KeyValue(key="")])
    request = _request([_span(1, events=[event])])
    request.resource_spans[0].resource.attributes.add(key="")
    assert validate_request(request).rejected_spans == 0


@pytest.mark.parametrize("told_size", [False, True])
def test_in_a_request_over_the_limit_each_span_is_checked_on_its_own(told_size: bool) -> None:
    """Values are walked where the encoding is larger than the limit: in a request over
    it, the span holding the long value is refused and its neighbours (each under the
    limit, together over it) are kept, whether the request's size is given or computed."""
    limits = SpanLimits(max_string_value_bytes=64)
    spans = [_span(i, attributes=[KeyValue(key="v", value=AnyValue(string_value="x" * 40))])
             for i in (1, 3)]  # fmt: skip
    long = KeyValue(key="v", value=AnyValue(array_value={"values": [{"string_value": "y" * 65}]}))
    request = _request([spans[0], _span(2, attributes=[long]), spans[1]])
    size = request.ByteSize() if told_size else None
    result = validate_request(request, limits, size)
    assert result.rejected_spans == 1
    assert "attributes[0] (v).arrayValue.values[0]: string value of 65 bytes" in (
        result.error_message
    )
    assert _names(request) == ["span 1", "span 3"]
