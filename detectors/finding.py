"""What a detector reports: a `Finding`, with a stable key for de-duplicating alerts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from pathgrade.schemas.json_text import sorted_text

Severity = Literal["low", "medium", "high", "critical"]
FindingKind = Literal["violation", "cannot_decide"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule (or one rule that could not be decided) in one trace.

    `span_id` is the span that broke the rule, or the turn's top span for turn-level findings.
    `identifying` names the `details` keys that tell this finding apart from others of the
    same code on the same span; only those enter `key`, so a re-evaluated (longer) trace
    yields the same key for the same problem.
    """

    code: str
    name: str
    severity: Severity
    kind: FindingKind
    reason: str
    trace_id: str
    span_id: str
    details: dict[str, Any] = field(default_factory=dict)
    identifying: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """Stable de-duplication key: hash of code, trace, span, kind and identifying details."""
        return finding_key(self)


def finding_key(finding: Finding) -> str:
    """Hex SHA-256 over the fields that identify `finding` (see `Finding.identifying`)."""
    identity = {name: finding.details.get(name) for name in finding.identifying}
    payload = sorted_text([finding.code, finding.kind, finding.trace_id, finding.span_id, identity])
    return hashlib.sha256(payload.encode()).hexdigest()[:32]
