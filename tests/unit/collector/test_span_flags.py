"""A span's OTLP flags (whether its parent is remote) survive the collector: the fact
kernel's whole spans and the Python redactor both forward them, grouping keeps them, and
the realtime plane's reader decodes them into `Span.parent_is_remote`."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.otlp import decode_spans_message
from pathgrade.content.pii import PiiScanner

UPSTREAM = SpanContext(
    trace_id=0x5B8EFFF798038103D269B633813FC60C, span_id=0x00F067AA0BA902B7, is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
)  # fmt: skip


def _request(with_event: bool) -> bytes:
    """What the OTel SDK exports for an HTTP server span whose parent came in a
    `traceparent` (remote) and an agent span inside it (local parent); the agent span has
    an event when `with_event` (the kernel leaves such a span to the Python redactor)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    upstream = trace.set_span_in_context(NonRecordingSpan(UPSTREAM))
    server = tracer.start_span("POST /chat", context=upstream, kind=trace.SpanKind.SERVER)
    with (
        trace.use_span(server, end_on_exit=True),
        tracer.start_as_current_span(
            "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}
        ) as agent,
    ):
        if with_event:
            agent.add_event("gen_ai.tool.call.decision", {"gen_ai.tool.call.id": "c1"})
    return encode_spans(exporter.get_finished_spans()).SerializeToString()


@pytest.mark.parametrize("native", [True, False], ids=["kernel", "python"])
@pytest.mark.parametrize("with_event", [False, True], ids=["whole", "with-event"])
def test_the_parent_s_remoteness_reaches_the_reader(native: bool, with_event: bool) -> None:
    body = _request(with_event)
    request = ExportTraceServiceRequest.FromString(body)
    maker = FactMaker(FactSecret(bytes(range(32))), PiiScanner(()), native=native)
    forwarded = Redactor(RedactionConfig(), maker).forward(request, "acme", body)
    (message,) = group_by_trace(forwarded).messages
    spans = {s.name: s for s in decode_spans_message(message.value, "acme", 1)}
    assert spans["POST /chat"].parent_is_remote is True
    assert spans["invoke_agent support"].parent_is_remote is False
