"""The collector's path for log records (issue 40): validation under the span limits,
the privacy path (content and body dropped unless captured, facts first, the allow-list,
scrubbing), grouping by trace into LogsData, and OTLP/JSON logs requests."""

from __future__ import annotations

import json
import os

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_logs_by_trace
from pathgrade.collector.otlp_json import LOGS, decode_export_request_json, response_json
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.collector.validate import SpanLimits, validate_logs_request
from pathgrade.schemas.fingerprints import FactSecret
from pathgrade.schemas.otlp import attributes_dict
from pathgrade.schemas.pii import PiiScanner

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
    request = _request(_record(), _record(trace=OTHER), _record(), LogRecord(time_unix_nano=5))
    grouped = group_logs_by_trace(request)
    counts = {m.key: len(_records(LogsData.FromString(m.value))) for m in grouped.messages}
    assert counts == {TRACE.hex().encode(): 2, OTHER.hex().encode(): 1, b"": 1}
    too_small = group_logs_by_trace(request, max_message_bytes=20)
    assert too_small.rejections.rejected_spans == 4 and not too_small.messages
    assert "log record" in too_small.rejections.error_message


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
