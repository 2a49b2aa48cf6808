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
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stack's metrics read the rows without loading the detectors
    from pathgrade.detectors import Finding

COVERAGE_SEVERITY = "low"
COVERAGE = "coverage"  # the realtime counters' entry holding `Coverage.rows()`
DETECTOR_ERRORS = "detector_errors"  # ... and the one holding detector exceptions by code
MAX_SERVICES = 10_000  # (tenant, service) pairs kept; the oldest is forgotten beyond it
CANDIDATES = 16  # undecided turns a held alert keeps, to go to when its turn decides
TurnKey = tuple[str, str, str]  # (tenant, trace id, top span id)


@dataclass(slots=True)
class _Gap:
    """One detector's undecided traces on one service, and the latest reason."""

    name: str
    undecided: int = 0
    missing: str = ""
    close: str = ""
    alerted_window: int = -1  # the window whose alert was sent or is held


@dataclass(slots=True)
class _Service:
    traces: int = 0
    gaps: dict[str, _Gap] = field(default_factory=dict)


@dataclass(slots=True)
class _HeldAlert:
    """A window's gap alert held until its hold is over: the undecided turns that may
    raise it, in grading order (turn -> when its hold ends, its finding, the caller's
    `where`)."""

    tenant: str
    service: str
    window: int
    entry: _Service
    gap: _Gap
    candidates: dict[TurnKey, tuple[int, Finding, Any]]


@dataclass(frozen=True, slots=True)
class GapAlert:
    """A coverage-gap alert due for one (tenant, service, detector) in this window."""

    finding: Finding  # the cannot-decide finding that opened the window's alert
    alert_key: str  # one per (tenant, service, code, window)
    reason: str
    details: dict[str, Any]


class Coverage:
    """Per (tenant, service): traces evaluated, and per detector the traces it could not
    decide; `observe` counts a graded turn, `due` hands out the gap alerts (one per window
    per detector) whose hold is over."""

    def __init__(self, window_s: float = 3600.0, hold_s: float = 10.0, turns: int = 10_000) -> None:
        """`turns`: the graded turns whose gaps are remembered (a re-grade of a turn
        forgotten changes no count)."""
        self.window_ns = int(window_s * 1e9)
        self.hold_ns = int(hold_s * 1e9)
        self.turns = turns
        self._services: dict[tuple[str, str], _Service] = {}
        self._counted: OrderedDict[TurnKey, frozenset[str]] = OrderedDict()  # turn -> codes
        self._held: dict[tuple[str, str, str, int], _HeldAlert] = {}  # (t, s, code, window)

    def observe(
        self,
        tenant: str,
        service: str,
        turn: TurnKey,
        gaps: list[Finding],
        now_ns: int,
        first: bool = True,
        alert: bool = True,
        where: Any = None,
    ) -> None:
        """Count one graded turn (when `first`: a re-grade counts once) and its gap
        findings: a re-grade counts the gaps it adds and withdraws those it no longer has
        (and their held alert). A gap opens the window's alert, held `hold_s` (`due`
        hands it out with `where`); none when not `alert`: the window's alert waits for a
        turn that shows the gap with everything it will get."""
        key = (tenant, service)
        entry = self._services.pop(key, None) or _Service()
        self._services[key] = entry  # most recently seen last
        if len(self._services) > MAX_SERVICES:
            del self._services[next(iter(self._services))]
        if first:
            entry.traces += 1
        found = {f.code: f for f in gaps}
        before = self._counted.pop(turn, None)
        if before is None:  # first graded, or forgotten: a re-grade changes no count
            before = frozenset() if first else frozenset(found)
        for code in before - found.keys():
            withdrawn = entry.gaps.get(code)
            if withdrawn is not None:
                withdrawn.undecided = max(0, withdrawn.undecided - 1)
                self._withdraw(tenant, service, code, turn, withdrawn)
        window = now_ns // self.window_ns
        for code, finding in found.items():
            gap = entry.gaps.setdefault(code, _Gap(finding.name))
            gap.undecided += code not in before
            gap.missing = str(finding.details.get("missing", ""))
            gap.close = str(finding.details.get("close", ""))
            if alert:
                self._hold(tenant, service, turn, finding, entry, gap, window, now_ns, where)
        self._counted[turn] = frozenset(found)
        if len(self._counted) > self.turns:
            self._counted.popitem(last=False)

    def _hold(
        self, tenant: str, service: str, turn: TurnKey, finding: Finding, entry: _Service,
        gap: _Gap, window: int, now_ns: int, where: Any,
    ) -> None:  # fmt: skip
        """Turn `turn` shows the gap: it opens the window's alert (held), or may raise the
        held one when the turns before it decide."""
        if gap.alerted_window != window:
            gap.alerted_window = window
            self._held[(tenant, service, finding.code, window)] = _HeldAlert(
                tenant, service, window, entry, gap, {}
            )
        held = self._held.get((tenant, service, finding.code, window))
        if held is not None and turn not in held.candidates and len(held.candidates) < CANDIDATES:
            held.candidates[turn] = (now_ns + self.hold_ns, finding, where)

    def _withdraw(self, tenant: str, service: str, code: str, turn: TurnKey, gap: _Gap) -> None:
        """Turn `turn` decided `code` after all: it no longer raises a held alert; one
        left without turns is dropped and the window's next undecided turn opens it."""
        for key, held in list(self._held.items()):
            if key[:3] != (tenant, service, code):
                continue
            held.candidates.pop(turn, None)
            if not held.candidates:
                del self._held[key]
                if gap.alerted_window == held.window:
                    gap.alerted_window = -1

    def due(self, now_ns: int | None) -> list[tuple[Any, GapAlert]]:
        """The held gap alerts whose hold is over at `now_ns` (None: every one, now: the
        plane stops or gives up partitions), each with the `where` of the turn raising
        it (the first of its turns, in grading order)."""
        out = []
        for key, held in list(self._held.items()):
            ends, finding, where = next(iter(held.candidates.values()))
            if now_ns is None or ends <= now_ns:
                del self._held[key]
                alert = self._alert(
                    held.tenant, held.service, finding, held.gap, held.entry.traces, held.window
                )
                out.append((where, alert))
        return out

    @property
    def held(self) -> int:
        """Gap alerts held."""
        return len(self._held)

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
