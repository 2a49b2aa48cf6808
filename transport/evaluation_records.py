"""pathgrade's verdicts as OTLP log records: each score a GenAI `gen_ai.evaluation.result`
event, each alert a `pathgrade.alert` event, both parented to the span they grade (the
record's trace id and span id are the score's or the alert's; a score without a span id
carries its trace id only), under the names and the pinned convention version of
`schemas.evaluation_records`.

Rows of tables `scores` and `alerts` (as dicts of column -> value) become records here;
every text a record carries goes through `clean` (the exporter scrubs personal data with
`PiiScanner`, as the collector does what it forwards). A request groups records by tenant,
one resource each (`service.name` pathgrade, `pathgrade.tenant`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs, SeverityNumber
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from pathgrade.schemas import genai
from pathgrade.schemas.evaluation_records import (
    ALERT_CODE,
    ALERT_EVENT,
    ALERT_INCOMPLETE,
    ALERT_KEY,
    ALERT_KIND,
    ALERT_NAME,
    ALERT_POLICY,
    ALERT_SERVICE,
    ALERT_SEVERITY,
    JUDGE_ERROR_LABEL,
    JUDGE_MODEL,
    RISK_TIER,
    SCHEMA_URL,
    SCOPE_NAME,
    SCORE_ID,
    SCORER,
    SCORER_VERSION,
    SEVERITIES,
    TENANT,
)  # fmt: skip

Clean = Callable[[str], str]


def _unchanged(text: str) -> str:
    return text


def evaluation_attributes(
    metric: str, value: float | None, label: str, explanation: str, clean: Clean = _unchanged
) -> dict[str, str | float]:
    """The `gen_ai.evaluation.result` attributes of a score (value, label and explanation
    only when set; `error.type` for a failed judge call), texts through `clean`."""
    attributes: dict[str, str | float] = {genai.EVALUATION_NAME: clean(metric)}
    if value is not None:
        attributes[genai.EVALUATION_SCORE_VALUE] = float(value)
    if label:
        attributes[genai.EVALUATION_SCORE_LABEL] = clean(label)
    if explanation:
        attributes[genai.EVALUATION_EXPLANATION] = clean(explanation)
    if label == JUDGE_ERROR_LABEL:
        attributes[genai.ERROR_TYPE] = JUDGE_ERROR_LABEL
    return attributes


def score_record(row: Mapping[str, Any], clean: Clean = _unchanged) -> LogRecord:
    """A `scores` row (`schemas.evaluation_records.SCORE_COLUMNS`) as a
    `gen_ai.evaluation.result` record."""
    attributes: dict[str, Any] = evaluation_attributes(
        row["Metric"], row["Value"], row["Label"], row["Explanation"], clean
    )
    attributes[SCORE_ID] = row["ScoreId"]
    attributes[SCORER] = clean(row["Scorer"])
    attributes[SCORER_VERSION] = clean(row["ScorerVersion"])
    optional = {
        JUDGE_MODEL: row["JudgeModel"],
        genai.PG_RUN_ID: row["RunId"],
        genai.PG_DATASET_ITEM_ID: row["DatasetItemId"],
    }
    attributes.update({key: clean(text) for key, text in optional.items() if text})
    return LogRecord(
        time_unix_nano=int(row["CreatedAtNs"]),
        observed_time_unix_nano=int(row["StoredAtNs"]),
        severity_number=SeverityNumber.SEVERITY_NUMBER_INFO,
        event_name=genai.EVENT_EVALUATION_RESULT,
        attributes=key_values(attributes),
        trace_id=_id_bytes(row["TraceId"], 16),
        span_id=_id_bytes(row["SpanId"], 8),
    )


def alert_record(row: Mapping[str, Any], clean: Clean = _unchanged) -> LogRecord:
    """An `alerts` row (`schemas.evaluation_records.ALERT_COLUMNS`) as a `pathgrade.alert`
    record: its reason is the body, its severity the record's (SEVERITIES)."""
    reason = clean(row["Reason"])
    attributes: dict[str, Any] = {
        ALERT_KEY: row["AlertKey"],
        ALERT_CODE: row["Code"],
        ALERT_NAME: clean(row["Name"]),
        ALERT_SEVERITY: row["Severity"],
        ALERT_KIND: row["Kind"],
        ALERT_SERVICE: clean(row["Service"]),
        genai.AGENT_NAME: clean(row["Agent"]),
        RISK_TIER: row["RiskTier"],
        ALERT_POLICY: clean(row["Policy"]),
        ALERT_INCOMPLETE: bool(int(row["Incomplete"])),
    }
    return LogRecord(
        time_unix_nano=int(row["DetectedAtNs"]),
        observed_time_unix_nano=int(row["StoredAtNs"]),
        severity_number=SEVERITIES.get(row["Severity"], SeverityNumber.SEVERITY_NUMBER_WARN),
        severity_text=row["Severity"],
        event_name=ALERT_EVENT,
        body=AnyValue(string_value=reason),
        attributes=key_values({key: value for key, value in attributes.items() if value != ""}),
        trace_id=_id_bytes(row["TraceId"], 16),
        span_id=_id_bytes(row["SpanId"], 8),
    )


def logs_request(records: Iterable[tuple[str, LogRecord]]) -> ExportLogsServiceRequest:
    """(tenant, record) pairs as one request: a resource per tenant, in order of first
    appearance, its records in the order given."""
    by_tenant: dict[str, list[LogRecord]] = {}
    for tenant, record in records:
        by_tenant.setdefault(tenant, []).append(record)
    scope = InstrumentationScope(name=SCOPE_NAME)
    return ExportLogsServiceRequest(
        resource_logs=[
            ResourceLogs(
                resource=Resource(
                    attributes=key_values({genai.SERVICE_NAME: SCOPE_NAME, TENANT: tenant})
                ),
                scope_logs=[ScopeLogs(scope=scope, log_records=batch, schema_url=SCHEMA_URL)],
                schema_url=SCHEMA_URL,
            )
            for tenant, batch in by_tenant.items()
        ]
    )


def key_values(attributes: Mapping[str, str | bool | int | float]) -> list[KeyValue]:
    """Attributes as OTLP key-values, each value of its own type."""
    return [KeyValue(key=key, value=_any_value(value)) for key, value in attributes.items()]


def _any_value(value: str | bool | int | float) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


def _id_bytes(text: str, size: int) -> bytes:
    """A hex trace or span id as the record's bytes; b"" (no id) for anything else."""
    try:
        raw = bytes.fromhex(text)
    except (TypeError, ValueError):
        return b""
    return raw if len(raw) == size and any(raw) else b""
