"""pathgrade's verdicts as OTLP log records: each score a GenAI `gen_ai.evaluation.result`
event, each alert a `pathgrade.alert` event, both parented to the span they grade (the
record's trace id and span id are the score's or the alert's; a score without a span id
carries its trace id only).

Pinned convention: `gen_ai.evaluation.result` as the OpenTelemetry semantic conventions
define it since 1.38.0 (EVALUATION_CONVENTIONS_VERSION; open-telemetry/
semantic-conventions-genai `model/gen-ai/events.yaml` reads the same): the event name in
the record's `event_name`, `gen_ai.evaluation.name` required, `gen_ai.evaluation.score.value`
and `gen_ai.evaluation.score.label` when they apply, `gen_ai.evaluation.explanation`
recommended, `error.type` when the evaluation failed; parented to the evaluated span.
Every scope carries that version's schema URL. pathgrade's own attributes (`pathgrade.*`)
give each record its identity (`pathgrade.score.id`, `pathgrade.alert.key`: a record sent
twice carries the same), and say which scorer or detector produced it.

Rows of tables `scores` and `alerts` (as dicts of column -> value) become records here;
every text a record carries goes through `clean` (the exporter scrubs personal data with
`PiiScanner`, as the collector does what it forwards). A request groups records by tenant,
one resource each (`service.name` pathgrade, `pathgrade.tenant`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs, SeverityNumber
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from pathgrade.schemas import genai

EVALUATION_CONVENTIONS_VERSION: Final = "1.38.0"
"""The semantic conventions version whose `gen_ai.evaluation.result` the records follow."""
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{EVALUATION_CONVENTIONS_VERSION}"
SCOPE_NAME: Final = "pathgrade"
ALERT_EVENT: Final = "pathgrade.alert"
JUDGE_ERROR_LABEL: Final = "judge_error"
"""Label of a judge score whose judge call failed (stored without a value; `error.type`)."""

# pathgrade's attributes on the records
TENANT: Final = "pathgrade.tenant"  # resource attribute
SCORE_ID: Final = "pathgrade.score.id"
SCORER: Final = "pathgrade.scorer"
SCORER_VERSION: Final = "pathgrade.scorer.version"
JUDGE_MODEL: Final = "pathgrade.judge.model"
ALERT_KEY: Final = "pathgrade.alert.key"
ALERT_CODE: Final = "pathgrade.alert.code"
ALERT_NAME: Final = "pathgrade.alert.name"
ALERT_SEVERITY: Final = "pathgrade.alert.severity"
ALERT_KIND: Final = "pathgrade.alert.kind"
ALERT_SERVICE: Final = "pathgrade.alert.service"
ALERT_POLICY: Final = "pathgrade.alert.policy"
ALERT_INCOMPLETE: Final = "pathgrade.alert.incomplete"
RISK_TIER: Final = "pathgrade.risk_tier"

SEVERITIES: Final[dict[str, int]] = {
    "low": SeverityNumber.SEVERITY_NUMBER_INFO,
    "medium": SeverityNumber.SEVERITY_NUMBER_WARN,
    "high": SeverityNumber.SEVERITY_NUMBER_ERROR,
    "critical": SeverityNumber.SEVERITY_NUMBER_FATAL,
}
"""An alert's severity -> the record's severity number (a score's is INFO)."""

SCORE_COLUMNS: Final = (
    "Tenant", "ScoreId", "Metric", "Value", "Label", "Explanation", "Scorer", "ScorerVersion",
    "JudgeModel", "RunId", "DatasetItemId", "TraceId", "SpanId", "CreatedAtNs", "StoredAtNs",
)  # fmt: skip
"""The fields of a `scores` row `score_record` reads."""
ALERT_COLUMNS: Final = (
    "Tenant", "AlertKey", "Code", "Name", "Severity", "Kind", "Reason", "TraceId", "SpanId",
    "Service", "Agent", "RiskTier", "Policy", "Incomplete", "DetectedAtNs", "StoredAtNs",
)  # fmt: skip
"""The fields of an `alerts` row `alert_record` reads (details and the conversation id stay
in pathgrade: find them by the alert key)."""

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
    """A `scores` row (SCORE_COLUMNS) as a `gen_ai.evaluation.result` record."""
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
    """An `alerts` row (ALERT_COLUMNS) as a `pathgrade.alert` record: its reason is the
    body, its severity the record's (SEVERITIES)."""
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
