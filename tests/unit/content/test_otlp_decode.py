"""Tests for content.otlp: OTLP protobuf bytes -> canonical spans."""

from __future__ import annotations

import dataclasses

import pytest
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status, TracesData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content.conventions import eval_context, genai_fields
from pathgrade.content.otlp import any_value, attributes_dict, decode_spans_message
from pathgrade.schemas.model import Span

TRACE_ID = bytes.fromhex("0AF7651916CD43DD8448EB211C80319C")
ROOT_ID = bytes.fromhex("B7AD6B7169203331")
CHILD_ID = bytes.fromhex("00F067AA0BA902B7")


def _kv(key: str, **value: object) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def _traces_data() -> TracesData:
    """One resource, one scope, a root agent span and a failed child tool span."""
    data = TracesData()
    resource_spans = data.resource_spans.add()
    resource_spans.resource.attributes.append(_kv("service.name", string_value="support-bot"))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "agent-sdk"
    scope_spans.scope.version = "1.2.3"
    root = scope_spans.spans.add(
        trace_id=TRACE_ID,
        span_id=ROOT_ID,
        name="invoke_agent Support",
        kind=ProtoSpan.SPAN_KIND_INTERNAL,
        start_time_unix_nano=1_000,
        end_time_unix_nano=9_000,
        trace_state="vendor=1",
        status=Status(code=Status.STATUS_CODE_OK),
    )
    root.attributes.extend(
        [
            _kv("gen_ai.operation.name", string_value="invoke_agent"),
            _kv("pathgrade.run.id", string_value="run-5"),
            _kv("pathgrade.replay.index", int_value=3),
        ]
    )
    event = root.events.add(time_unix_nano=2_000, name="gen_ai.user.message")
    event.attributes.append(_kv("content", string_value="hi"))
    link = root.links.add(trace_id=TRACE_ID, span_id=CHILD_ID, trace_state="k=v")
    link.attributes.append(_kv("reason", string_value="retry"))
    child = scope_spans.spans.add(
        trace_id=TRACE_ID,
        span_id=CHILD_ID,
        parent_span_id=ROOT_ID,
        name="execute_tool refund",
        kind=ProtoSpan.SPAN_KIND_CLIENT,
        start_time_unix_nano=3_000,
        end_time_unix_nano=4_000,
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
    )
    child.attributes.extend(
        [
            _kv("gen_ai.operation.name", string_value="execute_tool"),
            _kv("gen_ai.tool.call.arguments", string_value='{"order": 7}'),
            _kv("retry.delays", array_value=ArrayValue(values=[AnyValue(double_value=0.5)])),
        ]
    )
    return data


def test_any_value_reads_every_value_type_recursively() -> None:
    nested = KeyValueList(values=[_kv("a", int_value=1), _kv("b", bool_value=True)])
    array = ArrayValue(values=[AnyValue(string_value="x"), AnyValue(kvlist_value=nested)])
    assert any_value(AnyValue(string_value="s")) == "s"
    assert any_value(AnyValue(bool_value=False)) is False
    assert any_value(AnyValue(int_value=-5)) == -5
    assert any_value(AnyValue(double_value=1.5)) == 1.5
    assert any_value(AnyValue(bytes_value=b"\x00\x01")) == b"\x00\x01"
    assert any_value(AnyValue(array_value=array)) == ["x", {"a": 1, "b": True}]
    assert any_value(AnyValue()) is None


def test_attributes_dict_keeps_the_last_value_of_a_repeated_key() -> None:
    kvs = [_kv("k", int_value=1), _kv("k", int_value=2), _kv("m", kvlist_value=KeyValueList())]
    assert attributes_dict(kvs) == {"k": 2, "m": {}}


def test_decode_round_trip_of_protobuf_built_spans() -> None:
    root, child = decode_spans_message(_traces_data().SerializeToString(), "acme", 77)

    assert (root.tenant, root.received_at_ns) == ("acme", 77)
    assert root.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert (root.span_id, root.parent_span_id) == ("b7ad6b7169203331", "")
    assert (root.kind, root.status_code, root.trace_state) == ("Internal", "Ok", "vendor=1")
    assert (root.start_ns, root.end_ns) == (1_000, 9_000)
    assert root.service_name == "support-bot"
    assert root.resource_attributes == {"service.name": "support-bot"}
    assert (root.scope_name, root.scope_version) == ("agent-sdk", "1.2.3")
    assert (root.genai.operation, root.genai.agent_name) == ("invoke_agent", "Support")
    assert root.genai.error_type == ""
    assert (root.eval.run_id, root.eval.replay_index) == ("run-5", 3)
    assert [(e.time_ns, e.name, e.attributes) for e in root.events] == [
        (2_000, "gen_ai.user.message", {"content": "hi"})
    ]
    assert [(k.trace_id, k.span_id, k.trace_state, k.attributes) for k in root.links] == [
        ("0af7651916cd43dd8448eb211c80319c", "00f067aa0ba902b7", "k=v", {"reason": "retry"})
    ]

    assert child.parent_span_id == "b7ad6b7169203331"
    assert (child.kind, child.status_code, child.status_message) == ("Client", "Error", "boom")
    assert (child.genai.tool_name, child.genai.tool_arguments) == ("refund", '{"order": 7}')
    assert child.genai.error_type == "_OTHER"
    assert child.attributes["retry.delays"] == [0.5]


def test_error_type_attribute_is_kept_on_error_spans() -> None:
    data = _traces_data()
    failed = data.resource_spans[0].scope_spans[0].spans[1]
    failed.attributes.append(_kv("error.type", string_value="TimeoutError"))
    spans = decode_spans_message(data.SerializeToString(), "acme", 0)
    assert spans[1].genai.error_type == "TimeoutError"


def test_export_trace_service_request_bytes_decode_the_same() -> None:
    data = _traces_data()
    request = ExportTraceServiceRequest(resource_spans=data.resource_spans)
    from_request = decode_spans_message(request.SerializeToString(), "t", 1)
    from_traces_data = decode_spans_message(data.SerializeToString(), "t", 1)
    assert from_request == from_traces_data
    assert len(from_request) == 2


def test_unknown_enum_numbers_read_as_unspecified_and_unset() -> None:
    data = _traces_data()
    span = data.resource_spans[0].scope_spans[0].spans[0]
    span.kind = 42
    span.status.code = 9
    decoded = decode_spans_message(data.SerializeToString(), "t", 0)[0]
    assert (decoded.kind, decoded.status_code) == ("Unspecified", "Unset")


def test_malformed_bytes_raise_value_error_naming_the_message() -> None:
    with pytest.raises(ValueError, match=r"pathgrade\.spans message value"):
        decode_spans_message(b"\x0a\xff\xff\xff\xff\x0f garbage", "t", 0)


def test_empty_message_has_no_spans() -> None:
    assert decode_spans_message(b"", "t", 0) == []


def test_spans_from_the_official_sdk_decode_to_the_expected_fields() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pathgrade.tests", "0.9")
    with (
        tracer.start_as_current_span(
            "invoke_agent Triage",
            attributes={"gen_ai.operation.name": "invoke_agent", "pathgrade.dataset.item_id": "d1"},
        ) as root,
        tracer.start_as_current_span(
            "chat gpt-4o",
            kind=trace_api.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.usage.input_tokens": 11,
                "gen_ai.usage.output_tokens": 2,
                "gen_ai.response.finish_reasons": ("stop",),
            },
        ) as chat,
    ):
        chat.add_event("gen_ai.choice", {"index": 0})
        chat.set_status(trace_api.Status(trace_api.StatusCode.ERROR, "upstream 500"))
    finished = exporter.get_finished_spans()
    payload = encode_spans(finished).SerializeToString()

    spans = {s.span_id: s for s in decode_spans_message(payload, "tenant-a", 5)}

    root_id = format(root.get_span_context().span_id, "016x")
    chat_id = format(chat.get_span_context().span_id, "016x")
    trace_id = format(root.get_span_context().trace_id, "032x")
    assert set(spans) == {root_id, chat_id}
    decoded_root, decoded_chat = spans[root_id], spans[chat_id]
    assert decoded_root.trace_id == decoded_chat.trace_id == trace_id
    assert (decoded_root.parent_span_id, decoded_chat.parent_span_id) == ("", root_id)
    assert (decoded_root.kind, decoded_chat.kind) == ("Internal", "Client")
    assert decoded_root.service_name == decoded_chat.service_name == "sdk-agent"
    assert (decoded_chat.scope_name, decoded_chat.scope_version) == ("pathgrade.tests", "0.9")
    assert decoded_chat.start_ns == finished[0].start_time
    assert decoded_root.genai.agent_name == "Triage"
    assert decoded_root.eval.dataset_item_id == "d1"
    assert (decoded_chat.genai.request_model, decoded_chat.genai.total_tokens) == ("gpt-4o", 13)
    assert decoded_chat.genai.finish_reasons == ["stop"]
    assert (decoded_chat.status_code, decoded_chat.status_message) == ("Error", "upstream 500")
    assert decoded_chat.genai.error_type == "_OTHER"
    assert [(e.name, e.attributes) for e in decoded_chat.events] == [
        ("gen_ai.choice", {"index": 0})
    ]


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("POST", {"http.request.method": "POST", "http.response.status_code": 200}),
        ("SELECT orders", {"db.system.name": "postgresql", "pathgrade.run.id": "run-1"}),
        ("POST", {"http.request.method": "POST", "gen_ai.request.model": "gpt-4o"}),
        ("POST", {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}),
        ("POST", {"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup"}),
        ("chat gpt-4o", {"http.request.method": "POST"}),
        ("execute_tool lookup", {}),
        ("", {"gen_ai.conversation.id": "c-1"}),
        ("span", {"gen_ai.usage.input_tokens": 3, "llm.token_count.completion": 2}),
    ],
)
def test_spans_without_genai_keys_decode_as_genai_fields_reads_them(
    name: str, attributes: dict[str, object]
) -> None:
    """The decoder's shortcut for spans with no key `genai_fields` reads (and no operation
    in their name) gives what `genai_fields` and `eval_context` give, errors included."""
    data = TracesData()
    span = (
        data.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=TRACE_ID,
            span_id=ROOT_ID,
            name=name,
            status=Status(code=Status.STATUS_CODE_ERROR),
        )
    )
    for key, value in attributes.items():
        typed = {"int_value": value} if isinstance(value, int) else {"string_value": value}
        span.attributes.append(_kv(key, **typed))
    (decoded,) = decode_spans_message(data.SerializeToString(), "t", 0)
    expected = genai_fields(name, attributes)
    expected.error_type = expected.error_type or "_OTHER"
    assert decoded.genai == expected
    assert decoded.eval == eval_context(attributes)


def test_every_span_field_is_decoded_into_its_own_field() -> None:
    """The decoder builds spans positionally (a third of keywords' cost): each field of
    `Span` gets its own value, checked by name on a span where every field differs, so a
    field added to or moved in `Span` without the decoder fails here."""
    data = TracesData()
    resource_spans = data.resource_spans.add()
    resource_spans.resource.attributes.append(_kv("service.name", string_value="svc"))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name, scope_spans.scope.version = "scope-name", "scope-version"
    span = scope_spans.spans.add(
        trace_id=TRACE_ID, span_id=CHILD_ID, parent_span_id=ROOT_ID, name="chat m",
        kind=ProtoSpan.SPAN_KIND_CLIENT, start_time_unix_nano=5, end_time_unix_nano=7,
        trace_state="ts=1", status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
        flags=0x301,
    )  # fmt: skip
    span.attributes.extend(
        [
            _kv("gen_ai.operation.name", string_value="chat"),
            _kv("pathgrade.run.id", string_value="r"),
        ]
    )
    span.events.add(time_unix_nano=6, name="event")
    span.links.add(trace_id=TRACE_ID, span_id=ROOT_ID, trace_state="link=1")
    (decoded,) = decode_spans_message(data.SerializeToString(), "tenant-a", 11)
    expected = {
        "tenant": "tenant-a", "trace_id": TRACE_ID.hex(), "span_id": CHILD_ID.hex(),
        "parent_span_id": ROOT_ID.hex(), "name": "chat m", "kind": "Client", "start_ns": 5,
        "end_ns": 7, "service_name": "svc", "trace_state": "ts=1",
        "resource_attributes": {"service.name": "svc"}, "scope_name": "scope-name",
        "scope_version": "scope-version",
        "attributes": {"gen_ai.operation.name": "chat", "pathgrade.run.id": "r"},
        "status_code": "Error", "status_message": "boom", "received_at_ns": 11,
        "flags": 0x301,
    }  # fmt: skip
    init_fields = [f.name for f in dataclasses.fields(Span) if f.init]
    assert sorted(init_fields) == sorted([*expected, "events", "links", "genai", "eval"])
    for name, value in expected.items():
        assert getattr(decoded, name) == value, name
    assert [(e.time_ns, e.name) for e in decoded.events] == [(6, "event")]
    assert [(link.span_id, link.trace_state) for link in decoded.links] == [
        (ROOT_ID.hex(), "link=1")
    ]
    assert decoded.genai.operation == "chat" and decoded.eval.run_id == "r"
    assert decoded.parent_is_remote is True
