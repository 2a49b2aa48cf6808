"""One Kafka message per trace, in the OTel Collector's partition_traces_by_id shape."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.collector.grouping import group_by_trace


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
    messages = group_by_trace(request_with({a: 3, b: 2}))
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
    messages = group_by_trace(request_with({trace: 50}, resources=1), max_message_bytes=1000)
    assert len(messages) > 1
    total = 0
    for key, value in messages:
        assert key == trace.hex().encode()
        assert len(value) < 1000 + 200  # bound plus resource/scope framing
        total += sum(len(ss.spans) for rs in TracesData.FromString(value).resource_spans
                     for ss in rs.scope_spans)  # fmt: skip
    assert total == 50
