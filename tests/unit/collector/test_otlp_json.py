"""Tests for collector.otlp_json: OTLP/JSON request parsing and response encoding."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from google.protobuf import json_format, text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.collector.otlp_json import (
    DecodedRequest,
    OtlpJsonError,
    decode_export_request_json,
    parse_export_request_json,
    response_json,
)

from tests.support.otlp_values import nested_value

# Test vector: open-telemetry/opentelemetry-proto examples/trace.json (the OTLP/JSON form) ...
OFFICIAL_TRACE_JSON = """
{"resourceSpans": [{"resource": {"attributes": [{"key": "service.name",
  "value": {"stringValue": "my.service"}}]},
 "scopeSpans": [{"scope": {"name": "my.library", "version": "1.0.0",
   "attributes": [{"key": "my.scope.attribute",
     "value": {"stringValue": "some scope attribute"}}]},
  "spans": [{"traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174",
   "parentSpanId": "EEE19B7EC3C1B173", "name": "I'm a server span",
   "startTimeUnixNano": 1544712660000000000, "endTimeUnixNano": 1544712661000000000,
   "kind": 2, "attributes": [{"key": "my.span.attr", "value": {"stringValue": "some value"}}]
  }]}]}]}
"""
# ... and the same request as protobuf text: examples/trace.protobuf-text of that repository.
OFFICIAL_TRACE_TEXT = r"""
resource_spans: [{
  resource: {attributes: [{key: "service.name", value: {string_value: "my.service"}}]},
  scope_spans: [{
    scope: {name: "my.library", version: "1.0.0",
      attributes: [{key: "my.scope.attribute", value: {string_value: "some scope attribute"}}]},
    spans: [{
      trace_id: "\x5B\x8E\xFF\xF7\x98\x03\x81\x03\xD2\x69\xB6\x33\x81\x3F\xC6\x0C",
      span_id: "\xEE\xE1\x9B\x7E\xC3\xC1\xB1\x74",
      parent_span_id: "\xEE\xE1\x9B\x7E\xC3\xC1\xB1\x73",
      name: "I'm a server span",
      start_time_unix_nano: 1544712660000000000,
      end_time_unix_nano: 1544712661000000000,
      kind: 2,
      attributes: [{key: "my.span.attr", value: {string_value: "some value"}}]
    }]
  }]
}]
"""

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
PARENT_ID = "53995c3f42cd8ad8"


def _span_json(**fields: Any) -> dict[str, Any]:
    return {"traceId": TRACE_ID, "spanId": SPAN_ID, "name": "chat", **fields}


def _body(*spans: dict[str, Any]) -> bytes:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]}).encode()


def _only_span(request: ExportTraceServiceRequest) -> trace_pb2.Span:
    (span,) = request.resource_spans[0].scope_spans[0].spans
    return span


def _to_otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """Encode `request` as OTLP/JSON the way SDK exporters do: hex ids, integer enums."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for holder in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in holder:
                            holder[key] = base64.b64decode(holder[key]).hex()
    return json.dumps(document).encode()


def test_official_example_matches_its_protobuf_text() -> None:
    expected = text_format.Parse(OFFICIAL_TRACE_TEXT, ExportTraceServiceRequest())
    assert parse_export_request_json(OFFICIAL_TRACE_JSON.encode()) == expected


def test_round_trip_of_a_rich_request() -> None:
    span = trace_pb2.Span(
        trace_id=bytes.fromhex(TRACE_ID),
        span_id=bytes.fromhex(SPAN_ID),
        parent_span_id=bytes.fromhex(PARENT_ID),
        name="execute_tool search",
        kind=trace_pb2.Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=2**62,
        end_time_unix_nano=2**62 + 5,
        status=trace_pb2.Status(code=trace_pb2.Status.STATUS_CODE_ERROR, message="boom"),
        attributes=[
            KeyValue(key="s", value=AnyValue(string_value="x")),
            KeyValue(key="i", value=AnyValue(int_value=-(2**63))),
            KeyValue(key="d", value=AnyValue(double_value=1.5)),
            KeyValue(key="b", value=AnyValue(bytes_value=b"\x00\xff")),
        ],
        events=[trace_pb2.Span.Event(time_unix_nano=7, name="gen_ai.choice")],
        links=[trace_pb2.Span.Link(trace_id=bytes(15) + b"\x01", span_id=bytes(7) + b"\x02")],
    )
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.append(span)
    assert parse_export_request_json(_to_otlp_json(request)) == request


def test_ids_are_hex_including_links() -> None:
    link = {"traceId": TRACE_ID.upper(), "spanId": PARENT_ID}
    span = _only_span(
        parse_export_request_json(_body(_span_json(parentSpanId=PARENT_ID, links=[link])))
    )
    assert span.trace_id.hex() == TRACE_ID
    assert span.span_id.hex() == SPAN_ID
    assert span.parent_span_id.hex() == PARENT_ID
    assert span.links[0].trace_id.hex() == TRACE_ID
    assert span.links[0].span_id.hex() == PARENT_ID


def test_empty_ids_stay_empty_for_validation_to_judge() -> None:
    span = _only_span(parse_export_request_json(_body(_span_json(traceId="", parentSpanId=""))))
    assert span.trace_id == b""
    assert span.parent_span_id == b""


def test_snake_case_enum_names_and_string_ints_are_accepted() -> None:
    camel = _span_json(kind=3, startTimeUnixNano="10", endTimeUnixNano=20, status={"code": 2})
    snake = {
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "name": "chat",
        "kind": "SPAN_KIND_CLIENT",
        "start_time_unix_nano": 10,
        "end_time_unix_nano": "20",
        "status": {"code": "STATUS_CODE_ERROR"},
    }
    snake_body = json.dumps({"resource_spans": [{"scope_spans": [{"spans": [snake]}]}]})
    from_camel = parse_export_request_json(_body(camel))
    assert parse_export_request_json(snake_body.encode()) == from_camel
    span = _only_span(from_camel)
    assert span.kind == trace_pb2.Span.SPAN_KIND_CLIENT
    assert (span.start_time_unix_nano, span.end_time_unix_nano) == (10, 20)
    assert span.status.code == trace_pb2.Status.STATUS_CODE_ERROR


def test_unknown_fields_are_ignored() -> None:
    document = json.loads(_body(_span_json(futureField={"x": 1})))
    document["somethingNew"] = [1, 2]
    document["resourceSpans"][0]["extra"] = "y"
    span = _only_span(parse_export_request_json(json.dumps(document).encode()))
    assert span.name == "chat"


@pytest.mark.parametrize(
    ("span", "message"),
    [
        (
            _span_json(traceId=TRACE_ID[:31]),
            "resourceSpans[0].scopeSpans[0].spans[1].traceId: expected 32 hex characters, got 31",
        ),
        (
            _span_json(spanId="zz" * 8),
            "resourceSpans[0].scopeSpans[0].spans[1].spanId: not a hex string: 'zzzzzzzzzzzzzzzz'",
        ),
        (
            _span_json(parentSpanId=12),
            "resourceSpans[0].scopeSpans[0].spans[1].parentSpanId: expected a hex string, got int",
        ),
        (
            _span_json(links=[{"traceId": TRACE_ID, "spanId": "abc"}]),
            "resourceSpans[0].scopeSpans[0].spans[1].links[0].spanId: "
            "expected 16 hex characters, got 3",
        ),
        (
            _span_json(startTimeUnixNano="soon"),
            "resourceSpans[0].scopeSpans[0].spans[1].startTimeUnixNano: invalid literal",
        ),
        (
            _span_json(attributes=[{"key": "k", "value": {"doubleValue": "nope"}}]),
            "resourceSpans[0].scopeSpans[0].spans[1].attributes[0].value.doubleValue: "
            "Couldn't parse float",
        ),
        (
            _span_json(events="none"),
            "resourceSpans[0].scopeSpans[0].spans[1].events: expected a JSON array, got string",
        ),
        (
            _span_json(spanId="é" * 16),  # non-ASCII: binascii raises ValueError, not Error
            "resourceSpans[0].scopeSpans[0].spans[1].spanId: not a hex string: 'éééé",
        ),
        (
            _span_json(name="a\ud800b"),
            "resourceSpans[0].scopeSpans[0].spans[1].name: a lone surrogate escape",
        ),
        (
            _span_json(kind="\udfff"),  # made protobuf's enum lookup raise SystemError
            "resourceSpans[0].scopeSpans[0].spans[1].kind: a lone surrogate escape",
        ),
        (
            _span_json(attributes=[{"key": "\ud800", "value": {"stringValue": "x"}}]),
            "resourceSpans[0].scopeSpans[0].spans[1].attributes[0].key: a lone surrogate",
        ),
    ],
)
def test_bad_fields_are_named_by_path(span: dict[str, Any], message: str) -> None:
    with pytest.raises(OtlpJsonError) as info:
        parse_export_request_json(_body(_span_json(), span))
    assert str(info.value).startswith(message)


def test_malformed_json_reports_line_and_column() -> None:
    with pytest.raises(OtlpJsonError, match=r"invalid JSON: .* at line 2 column 18"):
        parse_export_request_json(b'{"resourceSpans":\n  [{"scopeSpans" []}]}')


def test_non_object_document_is_refused() -> None:
    with pytest.raises(OtlpJsonError, match="request: expected a JSON object, got array"):
        parse_export_request_json(b"[]")


def test_error_is_a_value_error() -> None:
    assert issubclass(OtlpJsonError, ValueError)


def test_response_without_rejections_is_empty_object() -> None:
    assert json.loads(response_json(0, "")) == {}


def test_response_with_rejections_is_partial_success() -> None:
    body = response_json(3, "span x: bad")
    assert json.loads(body) == {
        "partialSuccess": {"rejectedSpans": "3", "errorMessage": "span x: bad"}
    }
    response = json_format.Parse(body, ExportTraceServiceResponse())
    assert response.partial_success.rejected_spans == 3


def test_response_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="rejected_spans"):
        response_json(-1, "")


@pytest.mark.parametrize(
    ("levels", "kind", "message"),
    [
        (60, "array", "request: values nested deeper than protobuf's 100 message levels"),
        (40, "kvlist", "request: values nested deeper than protobuf's 100 message levels"),
        (200, "kvlist", "JSON nested deeper than 256 levels"),
    ],
)
def test_values_nested_too_deep_are_refused_with_the_limit(
    levels: int, kind: str, message: str
) -> None:
    attributes = [{"key": "deep", "value": nested_value(levels, kind)}]
    with pytest.raises(OtlpJsonError) as info:
        parse_export_request_json(_body(_span_json(attributes=attributes)))
    assert message in str(info.value)
    assert len(str(info.value)) < 400  # the path is cut short, not 256 steps long


def test_the_deepest_values_protobuf_holds_are_accepted() -> None:
    for levels, kind in ((47, "array"), (31, "kvlist")):
        attributes = [{"key": "deep", "value": nested_value(levels, kind)}]
        request = parse_export_request_json(_body(_span_json(attributes=attributes)))
        assert ExportTraceServiceRequest.FromString(request.SerializeToString()) == request


def test_json_nested_past_the_decoder_is_refused() -> None:
    for body in (b"[" * 5000 + b"]" * 5000, b'{"a":' * 5000 + b"1" + b"}" * 5000):
        with pytest.raises(OtlpJsonError, match=r"nested deeper than|expected a JSON object"):
            parse_export_request_json(body)
    with pytest.raises(
        OtlpJsonError, match=r"^a\.a\.a.*\.\.\.: JSON nested deeper than 256 levels"
    ):
        parse_export_request_json(b'{"a":' * 300 + b"1" + b"}" * 300)


# ---------------------------------------------------------------- refused span by span

BAD_VALUES: dict[str, tuple[str, str]] = {  # case: (JSON of one span field, field named)
    "an intValue of 2^70": (
        '"attributes": [{"key": "k", "value": {"intValue": 1180591620717411303424}}]',
        "attributes[0].value.intValue",
    ),
    "an intValue string past int64": (
        '"attributes": [{"key": "k", "value": {"intValue": "-9223372036854775809"}}]',
        "attributes[0].value.intValue",
    ),
    "a double of 1e400": (
        '"attributes": [{"key": "k", "value": {"doubleValue": 1e400}}]',
        "attributes[0].value.doubleValue",
    ),
    "a quoted double of -1e400, nested": (
        '"attributes": [{"key": "k", "value": {"arrayValue": {"values": '
        '[{"doubleValue": "-1e400"}]}}}]',
        "attributes[0].value.arrayValue.values[0].doubleValue",
    ),
    "a bare NaN token": (
        '"attributes": [{"key": "k", "value": {"doubleValue": NaN}}]',
        "attributes[0].value.doubleValue",
    ),
    "bytes that are not base64": (
        '"attributes": [{"key": "k", "value": {"bytesValue": "%%%"}}]',
        "attributes[0].value.bytesValue",
    ),
    "a negative start time": ('"startTimeUnixNano": -1', "startTimeUnixNano"),
    "an end time past uint64": ('"endTimeUnixNano": "18446744073709551616"', "endTimeUnixNano"),
    "a negative event time": ('"events": [{"timeUnixNano": -5}]', "events[0].timeUnixNano"),
    "a fractional time": ('"endTimeUnixNano": 1.5', "endTimeUnixNano"),
    "flags past uint32": ('"flags": 4294967296', "flags"),
    "a negative dropped count": ('"droppedAttributesCount": -1', "droppedAttributesCount"),
    "a lone surrogate in a key": (
        '"attributes": [{"key": "\\ud800", "value": {"stringValue": "x"}}]',
        "attributes[0].key",
    ),
    "a lone surrogate in a value": (
        '"attributes": [{"key": "k", "value": {"stringValue": "a\\udfffb"}}]',
        "attributes[0].value.stringValue",
    ),
    "a lone surrogate as an object key": ('"status": {"\\udc00": 1}', "status"),
    "a link id that is not hex": (
        f'"links": [{{"traceId": "{TRACE_ID}", "spanId": "zzzzzzzzzzzzzzzz"}}]',
        "links[0].spanId",
    ),
    "a name that is a number": ('"name": 5', "name"),
    "events that are no array": ('"events": "none"', "events"),
    "two values in one AnyValue": (
        '"attributes": [{"key": "k", "value": {"stringValue": "x", "intValue": 1}}]',
        "attributes[0].value",
    ),
}


def _span_text(number: int, extra: str = "") -> str:
    fields = (
        f'"traceId": "{TRACE_ID}", "spanId": "{number:016x}", "name": "s{number}", '
        '"startTimeUnixNano": 10, "endTimeUnixNano": 20'
    )
    return "{" + fields + (f", {extra}" if extra else "") + "}"


def _request_text(*resources: str) -> bytes:
    return ('{"resourceSpans": [' + ", ".join(resources) + "]}").encode()


def _resource_text(*spans: str, resource: str = "", scope: str = "") -> str:
    resource_part = f'"resource": {{{resource}}}, ' if resource else ""
    scope_part = f'"scope": {{{scope}}}, ' if scope else ""
    return f'{{{resource_part}"scopeSpans": [{{{scope_part}"spans": [{", ".join(spans)}]}}]}}'


def _kept_span_ids(decoded: DecodedRequest) -> list[int]:
    return [
        int.from_bytes(span.span_id, "big")
        for resource_spans in decoded.request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


@pytest.mark.parametrize(("case", "bad"), BAD_VALUES.items(), ids=list(BAD_VALUES))
def test_a_bad_value_refuses_its_span_only_named_like_protobuf_does(
    case: str, bad: tuple[str, str]
) -> None:
    extra, field_name = bad
    body = _request_text(_resource_text(_span_text(1), _span_text(2, extra), _span_text(3)))
    decoded = decode_export_request_json(body)
    assert _kept_span_ids(decoded) == [1, 3], case
    assert decoded.spans == 3
    (refused,) = decoded.refused
    path = "resourceSpans[0].scopeSpans[0].spans[1]"
    assert refused.line.startswith(f"span {TRACE_ID}/{2:016x} ({path}): {field_name}: "), (
        refused.line
    )
    with pytest.raises(OtlpJsonError, match=re.escape(f"{path}.{field_name}: ")):
        parse_export_request_json(body)  # the whole-request parse names the same field


def test_a_bad_resource_or_scope_value_refuses_the_spans_it_carries() -> None:
    bad_int = '"attributes": [{"key": "host", "value": {"intValue": "99999999999999999999"}}]'
    body = _request_text(
        _resource_text(_span_text(1), _span_text(2), resource=bad_int),
        _resource_text(_span_text(3), scope='"name": "lib\\ud800"'),
        _resource_text(_span_text(4)),
    )
    decoded = decode_export_request_json(body)
    assert _kept_span_ids(decoded) == [4]
    lines = [refused.line for refused in decoded.refused]
    assert lines[0] == (
        f"span {TRACE_ID}/{1:016x} (resourceSpans[0].scopeSpans[0].spans[0]): "
        "resource.attributes[0].value.intValue: Value out of range: 99999999999999999999"
    )
    assert lines[1].startswith(f"span {TRACE_ID}/{2:016x} (resourceSpans[0].scopeSpans[0]")
    assert lines[2] == (
        f"span {TRACE_ID}/{3:016x} (resourceSpans[1].scopeSpans[0].spans[0]): "
        "scope.name: a lone surrogate escape (\\ud800-\\udfff), which is not Unicode text"
    )


def test_a_span_with_unreadable_ids_is_named_by_its_path() -> None:
    body = _request_text(_resource_text('{"traceId": "xyz", "name": "n"}', "7", _span_text(3)))
    decoded = decode_export_request_json(body)
    assert _kept_span_ids(decoded) == [3]
    assert [refused.line for refused in decoded.refused] == [
        "span resourceSpans[0].scopeSpans[0].spans[0]: traceId: expected 32 hex characters, got 3",
        "span resourceSpans[0].scopeSpans[0].spans[1]: expected a JSON object, got number",
    ]


def test_the_spec_spellings_of_non_finite_doubles_are_values() -> None:
    """OTLP/JSON writes NaN and infinities as "NaN", "Infinity", "-Infinity" (protobuf
    carries them too); only a finite spelling that overflows is refused."""
    values = ", ".join(
        f'{{"key": "k{i}", "value": {{"doubleValue": "{text}"}}}}'
        for i, text in enumerate(("NaN", "Infinity", "-Infinity", "1.5e300"))
    )
    decoded = decode_export_request_json(
        _request_text(_resource_text(_span_text(1, f'"attributes": [{values}]')))
    )
    assert decoded.refused == []
    doubles = [a.value.double_value for a in _only_span(decoded.request).attributes]
    assert [str(d) for d in doubles] == ["nan", "inf", "-inf", "1.5e+300"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"resourceSpans": "x"}', "resourceSpans: expected a JSON array, got string"),
        (b'{"resourceSpans": [5]}', "resourceSpans[0]: expected a JSON object, got number"),
        (
            b'{"resourceSpans": [{"scopeSpans": [[]]}]}',
            "resourceSpans[0].scopeSpans[0]: expected a JSON object, got array",
        ),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": {}}]}]}',
            "resourceSpans[0].scopeSpans[0].spans: expected a JSON array, got object",
        ),
    ],
)
def test_a_skeleton_that_holds_no_spans_is_refused_whole(body: bytes, message: str) -> None:
    with pytest.raises(OtlpJsonError, match=re.escape(message)):
        decode_export_request_json(body)


_GOOD_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.integers(0, 5),
        "attributes": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.text(min_size=1, max_size=8),
                    "value": st.one_of(
                        st.fixed_dictionaries({"stringValue": st.text(max_size=12)}),
                        st.fixed_dictionaries({"intValue": st.integers(-(2**63), 2**63 - 1)}),
                        st.fixed_dictionaries(
                            {"doubleValue": st.floats(allow_nan=False, allow_infinity=False)}
                        ),
                        st.fixed_dictionaries({"boolValue": st.booleans()}),
                    ),
                }
            ),
            max_size=3,
        ),
    },
)


@settings(max_examples=60, deadline=None)
@given(
    spans=st.lists(
        st.tuples(_GOOD_FIELDS, st.one_of(st.none(), st.sampled_from(sorted(BAD_VALUES)))),
        min_size=1,
        max_size=6,
    )
)
def test_generated_requests_keep_every_good_span_and_name_every_bad_one(
    spans: list[tuple[dict[str, Any], str | None]],
) -> None:
    """Any mix of good spans and spans with one bad value planted: the good ones decode as
    they do in a request of their own, the bad ones are refused and named by id."""
    texts, good_texts = [], []
    for number, (fields, bad) in enumerate(spans, start=1):
        extra = json.dumps(fields)[1:-1]
        if bad is not None:
            extra = BAD_VALUES[bad][0]  # the bad field replaces the span's own
        text = _span_text(number, extra)
        texts.append(text)
        if bad is None:
            good_texts.append(text)
    decoded = decode_export_request_json(_request_text(_resource_text(*texts)))
    bad_numbers = [n for n, (_, bad) in enumerate(spans, start=1) if bad is not None]
    assert [r.ids for r in decoded.refused] == [f"{TRACE_ID}/{n:016x}" for n in bad_numbers]
    alone = decode_export_request_json(_request_text(_resource_text(*good_texts)))
    assert alone.refused == []
    assert decoded.request == alone.request
