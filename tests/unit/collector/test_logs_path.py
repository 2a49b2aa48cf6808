"""The collector's path for log records (issue 40): validation under the span limits,
the privacy path (content and body dropped unless captured, facts first, the allow-list,
scrubbing), grouping into LogsData (by trace, or by the partition of each trace), and
OTLP/JSON logs requests."""

from __future__ import annotations

import json
import os

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_logs
from pathgrade.collector.otlp_json import LOGS, decode_export_request_json, response_json
from pathgrade.collector.partitioner import key_partition
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.collector.spill import OutgoingMessage
from pathgrade.collector.validate import SpanLimits, validate_logs_request
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.otlp import attributes_dict
from pathgrade.content.pii import PiiScanner

TRACE, OTHER, SPAN = os.urandom(16), os.urandom(16), os.urandom(8)
CARD = "4111 1111 1111 1111"


def _request(*records: LogRecord) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    scope.log_records.extend(records)
    return request


def _record(name: str = "gen_ai.choice", trace: bytes = TRACE, **attributes: str) -> LogRecord:
    record = LogRecord(trace_id=trace, span_id=SPAN, time_unix_nano=10**18, event_name=name)
    for key, value in attributes.items():
        record.attributes.add(key=key).value.string_value = value
    return record


def _choice(text: str) -> LogRecord:
    record = _record()
    message = record.body.kvlist_value.values.add(key="message")
    message.value.kvlist_value.values.add(key="content").value.string_value = text
    return record


def _records(request: ExportLogsServiceRequest) -> list[LogRecord]:
    return [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]


def _redactor(**config: object) -> Redactor:
    secret = FactSecret(os.urandom(32))
    return Redactor(RedactionConfig(**config), FactMaker(secret, PiiScanner([])))


def test_invalid_records_are_refused_one_by_one_and_the_good_kept() -> None:
    long_body = _record()
    long_body.body.string_value = "x" * 2000
    request = _request(
        _record(), LogRecord(span_id=SPAN), _record(trace=bytes(16)),
        LogRecord(severity_number=99), long_body, LogRecord(time_unix_nano=1),
    )  # fmt: skip
    rejections = validate_logs_request(request, SpanLimits(max_string_value_bytes=1000))
    message = rejections.error_message
    assert rejections.rejected_spans == 4, message
    assert "spanId without a traceId" in message and "traceId is all zeros" in message
    assert "severityNumber 99" in message and "body: string value of 2000 bytes" in message
    assert [r.time_unix_nano for r in _records(request)] == [10**18, 1]


def test_by_default_content_and_body_are_dropped_and_their_facts_kept() -> None:
    details = _record(
        "gen_ai.client.inference.operation.details",
        **{"gen_ai.operation.name": "chat",
           "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
               {"type": "text", "content": f"card {CARD}"}]}]),
           "app.note": "mail jane@example.com", "gen_ai.tool.call.decision.outcome": "allow"},
    )  # fmt: skip
    request = _request(_choice(f"Your card {CARD}"), details)
    _redactor().redact_logs(request, "t")
    choice, inference = (attributes_dict(r.attributes) for r in _records(request))
    assert not _records(request)[0].HasField("body")
    assert json.loads(choice["pathgrade.facts.output"])["pii"] == {"card": 1}
    assert json.loads(choice["pathgrade.facts.pii.dropped"]) == {"body": {"card": 1}}
    assert "gen_ai.output.messages" not in inference and inference["pathgrade.redacted.keys"] == 1
    assert json.loads(inference["pathgrade.facts.output"])["pii"] == {"card": 1}
    assert inference["gen_ai.tool.call.decision.outcome"] == "allow"  # allowed: as it came
    assert inference["app.note"].startswith("[WITHHELD:string:")  # not allowed: its mark
    assert "jane@example.com" not in str(request) and CARD not in str(request)


def test_captured_messages_keep_the_body_scrubbed() -> None:
    request = _request(_choice(f"Your card {CARD}, jane@example.com"))
    _redactor(capture_messages=True).redact_logs(request, "t")
    (record,) = _records(request)
    text = record.body.kvlist_value.values[0].value.kvlist_value.values[0].value.string_value
    assert text == "Your card [REDACTED:card], [REDACTED:email]"
    facts = attributes_dict(record.attributes)
    assert json.loads(facts["pathgrade.facts.pii.scrubbed"]) == {"body": {"card": 1, "email": 1}}


def test_records_are_grouped_by_trace_into_logs_data() -> None:
    """Without the topic's partition count: one message per trace, as the OTel Collector's
    exporter keys them."""
    request = _request(_record(), _record(trace=OTHER), _record(), LogRecord(time_unix_nano=5))
    grouped = group_logs(request)
    counts = {m.key: len(_records(LogsData.FromString(m.value))) for m in grouped.messages}
    assert counts == {TRACE.hex().encode(): 2, OTHER.hex().encode(): 1, b"": 1}
    too_small = group_logs(request, max_message_bytes=20)
    assert too_small.rejections.rejected_spans == 4 and not too_small.messages
    assert "log record" in too_small.rejections.error_message


def _traces_per_partition(partitions: int, traces: int) -> list[bytes]:
    """`traces` random trace ids, at least two of them going to one of `partitions`."""
    while True:
        ids = [os.urandom(16) for _ in range(traces)]
        places = [key_partition(t.hex().encode(), partitions) for t in ids]
        if len(set(places)) < len(places):
            return ids


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_with_the_partition_count_a_message_holds_every_trace_of_its_partition(
    partitions: int,
) -> None:
    """Each message lands (by its key) where every trace of its records goes, one message
    per partition used, each record once and in request order within its trace."""
    traces = _traces_per_partition(partitions, 12)
    records = [_record(trace=traces[i % 12], **{"n": str(i)}) for i in range(40)]
    request = _request(*records)
    grouped = group_logs(request, partitions=partitions)
    places = {key_partition(t.hex().encode(), partitions) for t in traces}
    assert len(grouped.messages) == len(places) < len(traces)
    seen: list[tuple[bytes, str]] = []
    for message in grouped.messages:
        place = key_partition(message.key, partitions)
        held = _records(LogsData.FromString(message.value))
        assert {key_partition(r.trace_id.hex().encode(), partitions) for r in held} == {place}
        assert message.key == held[0].trace_id.hex().encode()
        seen += [(r.trace_id, attributes_dict(r.attributes)["n"]) for r in held]
    assert sorted(seen) == sorted((r.trace_id, attributes_dict(r.attributes)["n"]) for r in records)
    for trace in traces:  # request order kept within a trace
        numbers = [int(n) for t, n in seen if t == trace]
        assert numbers == sorted(numbers)


def test_a_partitions_records_over_the_message_limit_are_split_on_that_partition() -> None:
    traces = _traces_per_partition(1, 6)
    request = _request(*[_record(trace=traces[i % 6], note="x" * 200) for i in range(30)])
    grouped = group_logs(request, max_message_bytes=2000, partitions=1)
    assert len(grouped.messages) > 1 and not grouped.rejections.rejected_spans
    assert all(len(m.value) <= 2000 for m in grouped.messages)
    held = [_records(LogsData.FromString(m.value)) for m in grouped.messages]
    assert sum(map(len, held)) == 30
    assert all(
        m.key == h[0].trace_id.hex().encode() for m, h in zip(grouped.messages, held, strict=True)
    )


def test_otlp_json_logs_decode_record_by_record_with_hex_ids() -> None:
    body = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [
        {"traceId": TRACE.hex(), "spanId": SPAN.hex(), "eventName": "gen_ai.choice",
         "body": {"kvlistValue": {"values": [{"key": "index", "value": {"intValue": "0"}}]}}},
        {"traceId": "not hex", "spanId": SPAN.hex()},
        {"timeUnixNano": "5"},
    ]}]}]}).encode()  # fmt: skip
    decoded = decode_export_request_json(body, LOGS)
    assert decoded.spans == 3
    (refused,) = decoded.refused
    assert refused.line.startswith("log record resourceLogs[0].scopeLogs[0].logRecords[1]")
    first, last = _records(decoded.request)
    assert (first.trace_id, first.event_name, last.time_unix_nano) == (TRACE, "gen_ai.choice", 5)
    answer = json.loads(response_json(1, refused.line, LOGS))
    assert answer == {"partialSuccess": {"rejectedLogRecords": "1", "errorMessage": refused.line}}


class _Publisher:
    """What the pipeline asks of a logs publisher: the topic's partition count, and
    `publish`, which refuses every message when `refuse` says why."""

    def __init__(self, partitions: int | None, refuse: str = "") -> None:
        self.partitions = partitions
        self.refuse = refuse
        self.sent: list[OutgoingMessage] = []

    def partition_count(self) -> int | None:
        return self.partitions

    def publish(self, messages: list[OutgoingMessage], deadline: float | None) -> dict[int, str]:
        self.sent += messages
        return dict.fromkeys(range(len(messages)), self.refuse) if self.refuse else {}


@pytest.mark.parametrize("partitions", [None, 2])
def test_the_pipeline_groups_by_the_partition_count_its_publisher_knows(
    partitions: int | None,
) -> None:
    traces = _traces_per_partition(2, 10)
    publisher = _Publisher(partitions)
    pipeline = IngestPipeline(_redactor(), publisher, logs_publisher=publisher)  # type: ignore[arg-type]
    result = pipeline.ingest_logs(_request(*[_record(trace=t) for t in traces]), "acme")
    assert (result.accepted_spans, result.rejected_spans) == (10, 0)
    places = {key_partition(t.hex().encode(), 2) for t in traces}
    assert len(publisher.sent) == (len(places) if partitions else 10)
    assert {m.tenant for m in publisher.sent} == {"acme"}


def test_a_refused_message_of_several_traces_names_them() -> None:
    traces = _traces_per_partition(1, 7)
    publisher = _Publisher(1, refuse="Kafka refused the message (too large)")
    pipeline = IngestPipeline(_redactor(), publisher, logs_publisher=publisher)  # type: ignore[arg-type]
    result = pipeline.ingest_logs(_request(*[_record(trace=t) for t in traces]), "acme")
    assert (result.accepted_spans, result.rejected_spans) == (0, 7)
    named = ", ".join(t.hex() for t in traces[:5])
    assert f"of traces {named} and 2 more: Kafka refused the message" in result.error_message
