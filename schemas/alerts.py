"""Alert: one JSON document on topic `pathgrade.alerts`, one row of table `alerts`, one
webhook body. An alert is found on one agent turn (`content.agent_turns`): it names the
trace and the turn's top span; or it is a monitor's (kind `monitor`: a trend over a window
of turns, docs/monitors.md), which names an example turn of its window, if any, and says
in its details whether its episode is firing or resolved (`schemas.monitors`)."""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, Literal

from pathgrade.schemas.model import MAX_TIME_NS
from pydantic import BaseModel, ConfigDict, Field, model_validator

AlertSeverity = Literal["low", "medium", "high", "critical"]
AlertKind = Literal["violation", "cannot_decide", "monitor"]

# The columns of table `alerts` a row carries, in its order (schemas/migrations/0003_alerts.sql,
# 0014_alert_turns.sql, 0026_alert_tools.sql).
ALERT_COLUMNS: tuple[str, ...] = (
    "AlertKey", "Tenant", "Code", "Name", "Severity", "Kind", "Reason", "TraceId", "SpanId",
    "Service", "Agent", "ConversationId", "RiskTier", "Policy", "Details", "Incomplete",
    "TraceStartNs", "TraceEndNs", "DetectedAtNs", "TurnSpanId", "Tool",
)  # DetectedAt is derived from DetectedAtNs by the table  # fmt: skip
SEQ_COLUMNS = ("SpansPartition", "PartitionSeq")
"""The columns of table `alerts` after ALERT_COLUMNS that number each alert within its
partition of `pathgrade.spans` (or its stream: the realtime plane's `realtime_plane.delivery`)."""


class Alert(BaseModel):
    """A detector finding that the policy says to alert on, with where and when it happened.

    `alert_key` is the finding's stable key (`detectors.Finding.key`): a re-evaluated trace
    or a second consumer yields the same key, so sinks can de-duplicate on (tenant, key).
    """

    model_config = ConfigDict(frozen=True)

    schema_version: int = 1
    alert_key: str
    code: str = Field(pattern=r"^PG\d{3}$")
    name: str
    severity: AlertSeverity
    kind: AlertKind
    reason: str
    trace_id: str = Field(pattern=r"^([0-9a-f]{32})?$")  # "": a monitor's, no example turn
    span_id: str
    tenant: str
    service: str
    agent: str
    conversation_id: str
    risk_tier: str
    policy: str  # the policy file's name, or "default"
    details: dict[str, Any] = {}
    incomplete: bool = False  # evaluated before the turn was complete (max age, memory)
    # Times fit the alerts table's Int64 columns (a foreign producer may send any uint64).
    trace_start_ns: int = Field(ge=0, le=MAX_TIME_NS)  # the turn's top span's start
    trace_end_ns: int = Field(ge=0, le=MAX_TIME_NS)  # the turn's top span's end
    detected_at_ns: int = Field(ge=0, le=MAX_TIME_NS)
    turn_span_id: str = ""  # the top span of the turn it was found on ("": written before)
    tool: str = ""  # the tool its span calls (GenAIToolName; "": none, or written before)

    @model_validator(mode="after")
    def _found_on_a_trace(self) -> Alert:
        if not self.trace_id and self.kind != "monitor":
            raise ValueError("trace_id: required (only a monitor's alert may name no trace)")
        return self

    @cached_property
    def json_text(self) -> str:
        """The wire form as text, serialised once: the log line, the topic and the webhook
        share it."""
        return self.model_dump_json()

    def to_json(self) -> bytes:
        """The wire form: UTF-8 JSON."""
        return self.json_text.encode()

    @classmethod
    def from_json(cls, data: bytes | str) -> Alert:
        """Parse the wire form; raises pydantic.ValidationError naming the bad field."""
        return cls.model_validate_json(data)

    @classmethod
    def from_row(cls, row: list[Any]) -> Alert:
        """The alert of a row of table `alerts` in `ALERT_COLUMNS` order (as `row` makes it,
        read back through the store)."""
        fields = dict(zip(ALERT_COLUMNS, row, strict=True))
        return cls(
            alert_key=fields["AlertKey"], tenant=fields["Tenant"], code=fields["Code"],
            name=fields["Name"], severity=fields["Severity"], kind=fields["Kind"],
            reason=fields["Reason"], trace_id=fields["TraceId"], span_id=fields["SpanId"],
            service=fields["Service"], agent=fields["Agent"],
            conversation_id=fields["ConversationId"], risk_tier=fields["RiskTier"],
            policy=fields["Policy"], details=json.loads(fields["Details"] or "{}"),
            incomplete=bool(fields["Incomplete"]), trace_start_ns=int(fields["TraceStartNs"]),
            trace_end_ns=int(fields["TraceEndNs"]), detected_at_ns=int(fields["DetectedAtNs"]),
            turn_span_id=fields["TurnSpanId"], tool=fields["Tool"],
        )  # fmt: skip

    def row(self) -> list[Any]:
        """This alert as a row of table `alerts`, in `ALERT_COLUMNS` order."""
        return [
            self.alert_key, self.tenant, self.code, self.name, self.severity, self.kind,
            self.reason, self.trace_id, self.span_id, self.service, self.agent,
            self.conversation_id, self.risk_tier, self.policy,
            json.dumps(self.details, sort_keys=True, default=str), int(self.incomplete),
            self.trace_start_ns, self.trace_end_ns, self.detected_at_ns, self.turn_span_id,
            self.tool,
        ]  # fmt: skip
