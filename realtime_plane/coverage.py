"""Coverage: how often each detector could decide, per (tenant, service), and at most one
alert per window for a check that could not.

A detector that cannot decide on a trace because the deployment never captured what it
needs (a value PG105 bounds, a turn kind nobody sets) has found a gap of the deployment,
not an incident of that trace. Unless the policy asks for per-trace alerts (a check the
high tier requires, `ResolvedPolicy.should_alert`), its cannot-decide findings are counted
here: the coverage figure of (tenant, service, detector) is the share of that service's
evaluated traces the detector could decide, with what was missing and how to close the
gap; the first gap of each window raises one alert (kind `cannot_decide`, severity low).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stack's metrics read the rows without loading the detectors
    from pathgrade.detectors import Finding

COVERAGE_SEVERITY = "low"
COVERAGE = "coverage"  # the realtime counters' entry holding `Coverage.rows()`
DETECTOR_ERRORS = "detector_errors"  # ... and the one holding detector exceptions by code
MAX_SERVICES = 10_000  # (tenant, service) pairs kept; the oldest is forgotten beyond it


@dataclass(slots=True)
class _Gap:
    """One detector's undecided traces on one service, and the latest reason."""

    name: str
    undecided: int = 0
    missing: str = ""
    close: str = ""
    alerted_window: int = -1


@dataclass(slots=True)
class _Service:
    traces: int = 0
    gaps: dict[str, _Gap] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GapAlert:
    """A coverage-gap alert due for one (tenant, service, detector) in this window."""

    finding: Finding  # the cannot-decide finding that opened the window's alert
    alert_key: str  # one per (tenant, service, code, window)
    reason: str
    details: dict[str, Any]


class Coverage:
    """Per (tenant, service): traces evaluated, and per detector the traces it could not
    decide; `observe` returns the alerts due (one per window per detector)."""

    def __init__(self, window_s: float = 3600.0) -> None:
        self.window_ns = int(window_s * 1e9)
        self._services: dict[tuple[str, str], _Service] = {}

    def observe(
        self,
        tenant: str,
        service: str,
        gaps: list[Finding],
        now_ns: int,
        first: bool = True,
        alert: bool = True,
    ) -> list[GapAlert]:
        """Count one evaluated trace (when `first`: a re-evaluation counts once) and its
        gap findings; the gap alerts due now (none when not `alert`: the window's alert
        waits for a trace that shows the gap with everything it will get)."""
        key = (tenant, service)
        entry = self._services.pop(key, None) or _Service()
        self._services[key] = entry  # most recently seen last
        if len(self._services) > MAX_SERVICES:
            del self._services[next(iter(self._services))]
        if first:
            entry.traces += 1
        window = now_ns // self.window_ns
        due = []
        for finding in {f.code: f for f in gaps}.values():
            gap = entry.gaps.setdefault(finding.code, _Gap(finding.name))
            gap.undecided += first
            gap.missing = str(finding.details.get("missing", ""))
            gap.close = str(finding.details.get("close", ""))
            if alert and gap.alerted_window != window:
                gap.alerted_window = window
                due.append(self._alert(tenant, service, finding, gap, entry.traces, window))
        return due

    def _alert(
        self, tenant: str, service: str, finding: Finding, gap: _Gap, traces: int, window: int
    ) -> GapAlert:
        key_text = f"coverage|{tenant}|{service}|{finding.code}|{window}"
        reason = (
            f"Coverage gap: {finding.code} {finding.name} could not decide on {gap.undecided} "
            f"of {traces} traces of service {service or '(unnamed)'}: {finding.reason} "
            f"To close it: {gap.close}."
        )
        details = {
            "coverage_gap": True,
            "missing": gap.missing,
            "close": gap.close,
            "undecided_traces": gap.undecided,
            "traces": traces,
            "window_start_ns": window * self.window_ns,
            "window_s": self.window_ns / 1e9,
        }
        alert_key = hashlib.sha256(key_text.encode()).hexdigest()[:32]
        return GapAlert(finding, alert_key, reason, details)

    def figures(self) -> dict[str, list[dict[str, Any]]]:
        """What this tracker counted, in a form that adds up across consumers
        (`coverage_rows`): `services` (tenant, service, traces evaluated) and `gaps`
        (tenant, service, code, name, undecided traces, missing, close)."""
        return {
            "services": [
                {"tenant": tenant, "service": service, "traces": entry.traces}
                for (tenant, service), entry in self._services.items()
            ],
            "gaps": [
                {
                    "tenant": tenant, "service": service, "code": code, "name": gap.name,
                    "undecided": gap.undecided, "missing": gap.missing, "close": gap.close,
                }
                for (tenant, service), entry in self._services.items()
                for code, gap in sorted(entry.gaps.items())
            ],
        }  # fmt: skip


def consumers_coverage(counters: Iterable[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """`coverage_rows` of realtime consumers' counters (`RealtimePlane.counters`; None for
    one that did not answer)."""
    return coverage_rows((c or {}).get(COVERAGE) for c in counters)


def coverage_rows(figures: Iterable[Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """The coverage of every (tenant, service, detector) with a gap, from the figures of
    one or more consumers (added up): its gap's fields plus `traces` (of the service) and
    `coverage` (the share of them the detector decided); lowest coverage first."""
    traces: dict[tuple[str, str], int] = {}
    gaps: dict[tuple[str, str, str], dict[str, Any]] = {}
    for figure in figures:
        for row in (figure or {}).get("services", ()):
            key = (row["tenant"], row["service"])
            traces[key] = traces.get(key, 0) + row["traces"]
        for row in (figure or {}).get("gaps", ()):
            key3 = (row["tenant"], row["service"], row["code"])
            if key3 in gaps:
                gaps[key3]["undecided"] += row["undecided"]
            else:
                gaps[key3] = dict(row)
    for (tenant, service, _), row in gaps.items():
        row["traces"] = max(traces.get((tenant, service), 0), row["undecided"])
        row["coverage"] = round(1 - row["undecided"] / row["traces"], 4) if row["traces"] else 1.0
    return sorted(gaps.values(), key=lambda r: (r["coverage"], r["service"], r["code"]))
