"""Scores and alerts as OTLP log records: the GenAI `gen_ai.evaluation.result` shape, the
alert's own, and the same protobuf the official OpenTelemetry SDK log encoder writes for
records with these fields."""

from __future__ import annotations

from opentelemetry._logs import LogRecord as SdkLogRecord
from opentelemetry._logs import SeverityNumber as SdkSeverity
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import TraceFlags
from pathgrade.content.otlp import any_value, attributes_dict
from pathgrade.schemas.evaluation_records import SCHEMA_URL
from pathgrade.transport.evaluation_records import alert_record, logs_request, score_record

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
SCORE = {
    "Tenant": "acme", "ScoreId": "5c61f46a2fb45eb3d185892d529d24fa", "Metric": "faithfulness",
    "Value": 0.25, "Label": "fail", "Explanation": "made up a refund", "Scorer": "judge:f",
    "ScorerVersion": "faithfulness@1", "JudgeModel": "gpt-x", "RunId": "", "DatasetItemId": "",
    "TraceId": TRACE, "SpanId": SPAN, "CreatedAtNs": 1_700_000_000_000_000_000,
    "StoredAtNs": 1_700_000_001_000_000_000,
}  # fmt: skip
ALERT = {
    "Tenant": "acme", "AlertKey": "k-1", "Code": "PG115", "Name": "pii_in_output",
    "Severity": "high", "Kind": "violation", "Reason": "card in the final answer",
    "TraceId": TRACE, "SpanId": SPAN, "Service": "support", "Agent": "support-agent",
    "RiskTier": "high", "Policy": "default", "Incomplete": 0,
    "DetectedAtNs": 1_700_000_002_000_000_000, "StoredAtNs": 1_700_000_003_000_000_000,
}  # fmt: skip


def test_a_score_is_a_genai_evaluation_result_parented_to_its_span() -> None:
    record = score_record(SCORE)
    assert record.event_name == "gen_ai.evaluation.result"
    assert (record.trace_id.hex(), record.span_id.hex()) == (TRACE, SPAN)
    assert record.time_unix_nano == SCORE["CreatedAtNs"]
    assert attributes_dict(record.attributes) == {
        "gen_ai.evaluation.name": "faithfulness",
        "gen_ai.evaluation.score.value": 0.25,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "made up a refund",
        "pathgrade.score.id": SCORE["ScoreId"],
        "pathgrade.scorer": "judge:f",
        "pathgrade.scorer.version": "faithfulness@1",
        "pathgrade.judge.model": "gpt-x",
    }


def test_a_failed_judge_call_has_an_error_type_and_no_value() -> None:
    failed = {**SCORE, "Value": None, "Label": "judge_error", "Explanation": ""}
    attributes = attributes_dict(score_record(failed).attributes)
    assert attributes["error.type"] == "judge_error"
    assert "gen_ai.evaluation.score.value" not in attributes
    assert "gen_ai.evaluation.explanation" not in attributes


def test_a_score_without_a_span_or_with_bad_ids_carries_only_what_is_an_id() -> None:
    record = score_record({**SCORE, "SpanId": ""})
    assert (record.trace_id.hex(), record.span_id) == (TRACE, b"")
    record = score_record({**SCORE, "TraceId": "not-hex", "SpanId": "00" * 8})
    assert (record.trace_id, record.span_id) == (b"", b"")


def test_an_alert_is_a_record_of_its_own_with_its_reason_as_body() -> None:
    record = alert_record(ALERT, clean=str.upper)
    assert record.event_name == "pathgrade.alert"
    assert (record.trace_id.hex(), record.span_id.hex()) == (TRACE, SPAN)
    assert record.severity_number == 17 and record.severity_text == "high"  # ERROR
    assert any_value(record.body) == "CARD IN THE FINAL ANSWER"  # texts go through clean
    attributes = attributes_dict(record.attributes)
    assert attributes["pathgrade.alert.key"] == "k-1"
    assert attributes["pathgrade.alert.code"] == "PG115"
    assert attributes["pathgrade.alert.incomplete"] is False
    assert attributes["gen_ai.agent.name"] == "SUPPORT-AGENT"


def test_records_match_what_the_official_sdk_encoder_writes() -> None:
    """The request pathgrade builds decodes field for field as the official SDK's log
    encoder (opentelemetry-exporter-otlp-proto-common) writes the same records."""
    ours = logs_request([("acme", score_record(SCORE)), ("acme", alert_record(ALERT))])
    score_attributes = attributes_dict(score_record(SCORE).attributes)
    alert_attributes = attributes_dict(alert_record(ALERT).attributes)
    resource = Resource({"service.name": "pathgrade", "pathgrade.tenant": "acme"})
    scope = InstrumentationScope("pathgrade", schema_url=SCHEMA_URL)
    common = {"trace_id": int(TRACE, 16), "span_id": int(SPAN, 16), "trace_flags": TraceFlags(0)}
    official = encode_logs([
        ReadableLogRecord(SdkLogRecord(
            timestamp=SCORE["CreatedAtNs"], observed_timestamp=SCORE["StoredAtNs"],
            severity_number=SdkSeverity.INFO, event_name="gen_ai.evaluation.result",
            attributes=score_attributes, **common,
        ), resource, scope),
        ReadableLogRecord(SdkLogRecord(
            timestamp=ALERT["DetectedAtNs"], observed_timestamp=ALERT["StoredAtNs"],
            severity_number=SdkSeverity.ERROR, severity_text="high", event_name="pathgrade.alert",
            body=ALERT["Reason"], attributes=alert_attributes, **common,
        ), resource, scope),
    ])  # fmt: skip
    [ours_resource] = ours.resource_logs
    [official_resource] = official.resource_logs
    assert attributes_dict(ours_resource.resource.attributes) == attributes_dict(
        official_resource.resource.attributes
    )
    written = list(official_resource.scope_logs[0].log_records)
    for record in written:  # the SDK writes an empty body for a record without one
        if record.body == AnyValue():
            record.ClearField("body")
    assert list(ours_resource.scope_logs[0].log_records) == written
    assert ours_resource.scope_logs[0].scope.name == official_resource.scope_logs[0].scope.name
    assert ours_resource.scope_logs[0].schema_url == SCHEMA_URL


def test_a_request_has_one_resource_per_tenant() -> None:
    request = logs_request(
        [("a", score_record(SCORE)), ("b", score_record(SCORE)), ("a", alert_record(ALERT))]
    )
    tenants = [attributes_dict(r.resource.attributes)["pathgrade.tenant"]
               for r in request.resource_logs]  # fmt: skip
    assert tenants == ["a", "b"]
    assert [len(r.scope_logs[0].log_records) for r in request.resource_logs] == [2, 1]
