"""The fault and recovery tests' load (`tests.support.steady_load`) goes through the
collector's redaction with the ids it was sent with, so a test that looks its acknowledged
spans up by those ids finds every one. A span id that holds a card number is replaced by
its fingerprint (`content.pii.id_holds_card`): about 1 random span id in 8,000, so about 1
demo template in 14 held one, and the durable-log recovery test then waited 300 s for
spans stored under other ids."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.pii import id_holds_card

from tests.support.steady_load import SpanKey, demo_template, fresh_requests

CARD_ID = bytes.fromhex("4509786131024501")  # the span id of that failure: a Luhn-valid card


def keys_after_redaction(body: bytes) -> list[SpanKey]:
    """The (trace id, span id) of each span of `body` as the collector forwards it."""
    request = ExportTraceServiceRequest.FromString(body)
    Redactor(RedactionConfig()).redact(request)
    return [
        (span.trace_id.hex(), span.span_id.hex())
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


def test_a_template_span_id_that_holds_a_card_is_sent_under_one_the_collector_keeps() -> None:
    template = demo_template(traces=3)
    spans = [span for r in template.resource_spans for s in r.scope_spans for span in s.spans]
    parent = next(span for span in spans if span.parent_span_id).parent_span_id
    for span in spans:  # the parent and every reference to it
        if span.span_id == parent:
            span.span_id = CARD_ID
        if span.parent_span_id == parent:
            span.parent_span_id = CARD_ID
    assert id_holds_card(CARD_ID.hex())

    requests = fresh_requests(template, len(spans), 2, seed=7)  # two passes, one each

    for body, keys in requests:
        assert keys_after_redaction(body) == keys
        sent = ExportTraceServiceRequest.FromString(body)
        sent_spans = [span for r in sent.resource_spans for s in r.scope_spans for span in s.spans]
        ids = {span.span_id for span in sent_spans}
        assert CARD_ID not in ids and len(ids) == len(spans)
        assert {span.parent_span_id for span in sent_spans} - {b""} <= ids  # links kept
