"""One Kafka message per trace, in the OTel Collector's partition_traces_by_id shape."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.collector.grouping import group_by_trace

from tests.support.forwarded import as_published


def request_with(traces: dict[bytes, int], resources: int = 2) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for r in range(resources):
        resource_spans = request.resource_spans.add()
        attribute = resource_spans.resource.attributes.add()
        attribute.key, attribute.value.string_value = "service.name", f"svc-{r}"
        scope = resource_spans.scope_spans.add()
        scope.scope.name = f"scope-{r}"
        for trace_id, count in traces.items():
            for i in range(count):
                span = scope.spans.add()
                span.trace_id, span.span_id = trace_id, bytes([r, i, 1, 1, 1, 1, 1, 1])
                span.name = "x" * 100
    return request


def test_one_message_per_trace_keyed_by_hex_with_resources_kept() -> None:
    a, b = bytes(range(16)), bytes(range(1, 17))
    grouped = group_by_trace(as_published(request_with({a: 3, b: 2})))
    assert grouped.rejections.rejected_spans == 0
    messages = [(m.key, m.value) for m in grouped.messages]
    assert sorted(key for key, _ in messages) == sorted([a.hex().encode(), b.hex().encode()])
    for key, value in messages:
        data = TracesData.FromString(value)
        spans = [s for rs in data.resource_spans for ss in rs.scope_spans for s in ss.spans]
        assert {s.trace_id.hex() for s in spans} == {key.decode()}
        assert len(data.resource_spans) == 2
        services = [rs.resource.attributes[0].value.string_value for rs in data.resource_spans]
        assert services == ["svc-0", "svc-1"]
        assert [rs.scope_spans[0].scope.name for rs in data.resource_spans] == [
            "scope-0",
            "scope-1",
        ]
    counts = {key: sum(len(ss.spans) for rs in TracesData.FromString(v).resource_spans
                       for ss in rs.scope_spans) for key, v in messages}  # fmt: skip
    assert counts == {a.hex().encode(): 6, b.hex().encode(): 4}


def test_large_trace_split_under_the_bound_still_one_trace_each() -> None:
    trace = bytes(range(16))
    request = request_with({trace: 50}, resources=2)
    request.resource_spans[0].schema_url = "https://opentelemetry.io/schemas/1.26.0"
    grouped = group_by_trace(as_published(request), max_message_bytes=1000)
    assert len(grouped.messages) > 1
    total = 0
    for message in grouped.messages:
        assert message.key == trace.hex().encode()
        assert len(message.value) <= 1000  # the bound holds with resources and scopes
        spans = [s for rs in TracesData.FromString(message.value).resource_spans
                 for ss in rs.scope_spans for s in ss.spans]  # fmt: skip
        assert [s.span_id for s in spans] == [s.span_id for s in message.spans]
        total += len(spans)
    assert total == 100


def nested_strings(count: int, size: int) -> AnyValue:
    """An array of `count` kvlists each holding one string of `size` bytes."""
    value = AnyValue()
    for i in range(count):
        pair = value.array_value.values.add().kvlist_value.values.add()
        pair.key, pair.value.string_value = f"part{i}", "x" * size
    return value


def test_span_whose_parts_add_up_past_the_bound_is_refused_by_name() -> None:
    """Each string is small; together the span cannot be one message: refused, named,
    and the other spans of its trace are still published."""
    trace = bytes(range(16))
    request = request_with({trace: 3}, resources=1)
    big = request.resource_spans[0].scope_spans[0].spans[1]
    big.events.add(time_unix_nano=5, name="e").attributes.add(
        key="parts", value=nested_strings(20, 100)
    )
    grouped = group_by_trace(as_published(request), max_message_bytes=1500)

    assert grouped.rejections.rejected_spans == 1
    message = grouped.rejections.error_message
    assert message.startswith(f"span {trace.hex()}/{big.span_id.hex()} ")
    assert "(resourceSpans[0].scopeSpans[0].spans[1])" in message
    assert "exceeds the per-span limit of 1500 bytes (max_message_bytes" in message
    published = [s.span_id for m in grouped.messages for s in m.spans]
    assert big.span_id not in published and len(published) == 2


def test_a_resource_too_large_for_any_message_refuses_its_spans() -> None:
    request = request_with({bytes(range(16)): 2}, resources=2)
    request.resource_spans[1].resource.attributes.add(
        key="host.labels", value=nested_strings(30, 100)
    )
    grouped = group_by_trace(as_published(request), max_message_bytes=2000)
    assert grouped.rejections.rejected_spans == 2
    assert [len(m.spans) for m in grouped.messages] == [2]
    assert all(len(m.value) <= 2000 for m in grouped.messages)


def protobuf_traces_data(
    request: ExportTraceServiceRequest, ids: list[tuple[bytes, bytes]]
) -> bytes:
    """The TracesData protobuf itself encodes for the spans of `request` with (trace id,
    span id) in `ids`,
    grouped under copies of their resources and scopes as they first come."""
    data = TracesData()
    for resource_spans in request.resource_spans:
        resource = None
        for scope_spans in resource_spans.scope_spans:
            scope = None
            for span in scope_spans.spans:
                if (span.trace_id, span.span_id) not in ids:
                    continue
                if resource is None:
                    resource = data.resource_spans.add(schema_url=resource_spans.schema_url)
                    resource.resource.CopyFrom(resource_spans.resource)
                if scope is None:
                    scope = resource.scope_spans.add(schema_url=scope_spans.schema_url)
                    scope.scope.CopyFrom(scope_spans.scope)
                scope.spans.append(span)
    return data.SerializeToString()


def test_messages_are_the_bytes_protobuf_encodes() -> None:
    """Messages are written from the parts' encodings: byte for byte what protobuf
    encodes for the same TracesData, with empty and non-empty resources, scopes and schema
    URLs, and lengths taking one, two and three varint bytes."""
    a, b = bytes(range(16)), bytes(range(1, 17))
    request = request_with({a: 3, b: 2}, resources=3)
    request.resource_spans[0].schema_url = "https://opentelemetry.io/schemas/1.26.0"
    request.resource_spans[1].ClearField("resource")
    request.resource_spans[1].scope_spans[0].ClearField("scope")
    request.resource_spans[1].scope_spans[0].schema_url = "https://example.com/scope"
    extra_scope = request.resource_spans[2].scope_spans.add()
    extra_scope.spans.add(trace_id=a, span_id=bytes(8 * [9]), name="y" * 20_000)
    request.resource_spans[2].scope_spans[0].spans[0].name = "z" * 200
    grouped = group_by_trace(as_published(request))
    assert len(grouped.messages) == 2
    for message in grouped.messages:
        ids = [(span.trace_id, span.span_id) for span in message.spans]
        assert message.value == protobuf_traces_data(request, ids)
