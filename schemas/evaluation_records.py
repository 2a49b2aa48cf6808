"""The names of pathgrade's verdicts as OTLP log records (`transport.evaluation_records`
builds them): each score a GenAI `gen_ai.evaluation.result` event, each alert a
`pathgrade.alert` event.

Pinned convention: `gen_ai.evaluation.result` as the OpenTelemetry semantic conventions
define it since 1.38.0 (EVALUATION_CONVENTIONS_VERSION; open-telemetry/
semantic-conventions-genai `model/gen-ai/events.yaml` reads the same): the event name in
the record's `event_name`, `gen_ai.evaluation.name` required, `gen_ai.evaluation.score.value`
and `gen_ai.evaluation.score.label` when they apply, `gen_ai.evaluation.explanation`
recommended, `error.type` when the evaluation failed; parented to the evaluated span.
Every scope carries that version's schema URL. pathgrade's own attributes (`pathgrade.*`)
give each record its identity (`pathgrade.score.id`, `pathgrade.alert.key`: a record sent
twice carries the same), and say which scorer or detector produced it.
"""

from __future__ import annotations

from typing import Final

from opentelemetry.proto.logs.v1.logs_pb2 import SeverityNumber

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
"""The fields of a `scores` row `transport.evaluation_records.score_record` reads."""
ALERT_COLUMNS: Final = (
    "Tenant", "AlertKey", "Code", "Name", "Severity", "Kind", "Reason", "TraceId", "SpanId",
    "Service", "Agent", "RiskTier", "Policy", "Incomplete", "DetectedAtNs", "StoredAtNs",
)  # fmt: skip
"""The fields of an `alerts` row `transport.evaluation_records.alert_record` reads (details
and the conversation id stay in pathgrade: find them by the alert key)."""
