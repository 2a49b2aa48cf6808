"""TurnEvaluator: runs the detectors over one due agent turn and turns new findings into
alerts.

It resolves the policy for the turn's service, agent and risk tier (read from its top
span), hands the detectors digests of the turns of the same conversation that started
before this one (a bounded cache of the turns it evaluated and, with shared history, of
those other consumers evaluated; chosen by the turns' own start times, never by the order
they were evaluated in), and remembers which finding keys each trace already alerted on
(bounded), so a re-evaluated turn, or a turn nested in one evaluated before, never alerts
twice. Cannot-decide findings that do not alert per turn are coverage gaps
(`realtime_plane.coverage`): counted per service and detector, alerted once per window.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

from pathgrade.detectors import (
    DetectorContext,
    Finding,
    Policy,
    ResolvedPolicy,
    run_detectors,
    turn_digest,
)
from pathgrade.detectors.policy import DEFAULT_RISK_TIER, RiskTier
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.coverage import COVERAGE_SEVERITY, Coverage, GapAlert
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.model import Trace
from pathgrade.schemas.turns import TurnDigest

RISK_TIER_ATTRIBUTE = "pathgrade.risk_tier"
RISK_TIERS: tuple[RiskTier, ...] = ("low", "medium", "high")


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What one detector run over one turn found, and the alerts not sent before."""

    due: DueTurn
    service: str
    agent: str
    conversation_id: str
    risk_tier: RiskTier
    findings: list[Finding]  # every finding the policy alerts on
    new_alerts: list[Alert]  # those whose key the trace has not alerted on before, and
    # the coverage-gap alerts due
    digest: TurnDigest | None  # what later turns may know of this one (None: no conversation)
    context: DetectorContext  # the detectors' context (its view of the turn, the prices)


def policy_risk_tier(policy: Policy, service: str, agent: str) -> RiskTier | None:
    """The tier the policy sets for this service or agent (most specific wins), if any."""
    doc = policy.document
    service_section = doc.services.get(service)  # type: ignore[attr-defined]
    sections = [
        service_section.agents.get(agent) if service_section else None,
        doc.agents.get(agent),  # type: ignore[attr-defined]
        service_section,
        doc.defaults,  # type: ignore[attr-defined]
    ]
    return next((s.risk_tier for s in sections if s is not None and s.risk_tier), None)


def _start_ns(digest: TurnDigest) -> int:
    return digest.start_ns


class _Lru(OrderedDict):
    """An OrderedDict that forgets its oldest entries beyond `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: object, value: object) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class TurnEvaluator:
    """Policy resolution, conversation history, detector run and alert de-duplication."""

    def __init__(
        self,
        policy: Policy,
        policy_name: str = "default",
        conversations: int = 10_000,
        turns_per_conversation: int = 8,
        traces_remembered: int = 10_000,
        coverage_window_s: float = 3600.0,
    ) -> None:
        self.policy = policy
        self.policy_name = policy_name
        self.turns_per_conversation = turns_per_conversation
        self._resolved: dict[tuple[str, str, RiskTier], ResolvedPolicy] = {}
        # (tenant, conversation id) -> {(trace id, top span id): TurnDigest}, oldest first
        self._conversations = _Lru(conversations)
        self._alerted = _Lru(traces_remembered)  # (tenant, trace id) -> set of finding keys
        self.duplicates_suppressed = 0
        self.coverage = Coverage(coverage_window_s)
        self.detector_errors: Counter[str] = Counter()  # code -> exceptions raised

    def risk_tier(self, turn: Trace, service: str, agent: str) -> RiskTier:
        """Policy tier, else a valid `pathgrade.risk_tier` on the turn's top span (or a span
        enclosing it only), else medium."""
        tier = policy_risk_tier(self.policy, service, agent)
        if tier is not None:
            return tier
        spans = turn.own_spans()
        hinted = next((h for s in spans if (h := s.attributes.get(RISK_TIER_ATTRIBUTE))), None)
        return hinted if hinted in RISK_TIERS else DEFAULT_RISK_TIER

    def resolve(self, service: str, agent: str, tier: RiskTier) -> ResolvedPolicy:
        key = (service, agent, tier)
        if key not in self._resolved:
            self._resolved[key] = self.policy.resolve(service, agent, tier)
        return self._resolved[key]

    def evaluate(self, due: DueTurn, now_ns: int) -> Evaluation:
        """Run the detectors over `due.turn`; alerts only for findings not alerted before."""
        trace = due.turn
        head = trace.root or trace.spans[0]  # the turn's top span
        service, agent = head.service_name, head.genai.agent_name
        spans = trace.session_spans()
        conversation = next((s.genai.conversation_id for s in spans if s.genai.conversation_id), "")
        tier = self.risk_tier(trace, service, agent)
        resolved = self.resolve(service, agent, tier)
        context = resolved.context(self._history(head.start_ns, trace, conversation))
        found = run_detectors(trace, resolved, context, self.detector_errors)
        findings = [f for f in found if resolved.should_alert(f)]
        gaps = [f for f in found if f.kind == "cannot_decide" and not resolved.should_alert(f)]
        due_gaps = self.coverage.observe(
            trace.tenant, service, gaps, now_ns, not due.re_evaluation, not due.context_pending
        )
        digest = turn_digest(context.view_of(trace), conversation) if conversation else None
        if digest is not None:
            self.remember(digest)
        seen = self._alerted.get((trace.tenant, trace.trace_id)) or set()
        fresh = [(key, f) for f in findings if (key := f.key) not in seen]
        self.duplicates_suppressed += len(findings) - len(fresh)
        self._alerted.put((trace.tenant, trace.trace_id), seen | {key for key, _ in fresh})
        common = {
            "tenant": trace.tenant, "service": service, "agent": agent,
            "conversation_id": conversation, "risk_tier": tier, "policy": self.policy_name,
            "incomplete": due.incomplete, "trace_start_ns": head.start_ns,
            "trace_end_ns": head.end_ns, "detected_at_ns": now_ns, "trace_id": trace.trace_id,
            "turn_span_id": head.span_id,
        }  # fmt: skip
        tools = (
            {s.span_id: s.genai.tool_name for s in (*trace.spans, *trace.context)}
            if fresh or due_gaps
            else {}
        )  # the tool of each span an alert may be pinned to; most turns raise none
        alerts = [_alert(key, f, common, tools.get(f.span_id, "")) for key, f in fresh]
        alerts += [_gap_alert(gap, common, tools.get(gap.finding.span_id, "")) for gap in due_gaps]
        return Evaluation(
            due, service, agent, conversation, tier, findings, alerts, digest, context
        )

    def alerted(self, trace: tuple[str, str], keys: set[str]) -> None:
        """Findings of trace `trace` (tenant, trace id) already alerted elsewhere (by the
        partition's previous reader): evaluated again, they raise no alert."""
        self._alerted.put(trace, (self._alerted.get(trace) or set()) | keys)

    def remember(self, digest: TurnDigest) -> None:
        """Keep a turn's digest for later turns of its conversation (replacing an earlier
        digest of the same turn): turns this evaluator evaluated and, with shared history,
        turns other consumers evaluated. Beyond `turns_per_conversation`, the turn that
        started first is forgotten."""
        key = (digest.tenant, digest.conversation_id)
        turns = self._conversations.get(key) or {}
        turns[(digest.trace_id, digest.span_id)] = digest
        if len(turns) > self.turns_per_conversation:
            del turns[min(turns, key=lambda k: (turns[k].start_ns, k))]
        self._conversations.put(key, turns)

    def _history(self, start_ns: int, turn: Trace, conversation: str) -> list[TurnDigest]:
        """Digests of the conversation's turns that started before this one (at
        `start_ns`), oldest first."""
        if not conversation:
            return []
        turns = self._conversations.get((turn.tenant, conversation), {})
        own = (turn.trace_id, turn.top_span_id)
        earlier = [d for k, d in turns.items() if d.start_ns < start_ns and k != own]
        earlier.sort(key=_start_ns)
        return earlier


def _alert(key: str, finding: Finding, common: dict, tool: str) -> Alert:
    """The alert of a finding of the evaluated turn, pinned to a span calling `tool`."""
    return Alert(
        alert_key=key, code=finding.code, name=finding.name, severity=finding.severity,
        kind=finding.kind, reason=finding.reason, span_id=finding.span_id,
        details=finding.details, tool=tool, **common,
    )  # fmt: skip


def _gap_alert(gap: GapAlert, common: dict, tool: str) -> Alert:
    """The window's alert of a coverage gap, on the top span of the turn that opened it
    (calling `tool`)."""
    finding = gap.finding
    return Alert(
        alert_key=gap.alert_key, code=finding.code, name=finding.name,
        severity=COVERAGE_SEVERITY, kind="cannot_decide", reason=gap.reason,
        span_id=finding.span_id, details=gap.details, tool=tool, **common,
    )  # fmt: skip
