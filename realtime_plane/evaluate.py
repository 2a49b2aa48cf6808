"""TraceEvaluator: runs the detectors over one due trace and turns new findings into alerts.

It resolves the policy for the trace's service, agent and risk tier, hands the detectors
earlier turns of the same conversation (a bounded cache of the turns it evaluated and, with
shared history, the turns other consumers evaluated), and remembers which finding keys
each trace already alerted on (bounded), so a re-evaluated trace never alerts twice.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from detectors import Finding, Policy, ResolvedPolicy, run_detectors
from detectors.policy import DEFAULT_RISK_TIER, RiskTier
from detectors.view import ViewCache
from realtime_plane.assembler import DueTrace
from realtime_plane.turns import RemoteTurn
from schemas.alerts import Alert
from schemas.model import Span, Trace

log = logging.getLogger(__name__)

RISK_TIER_ATTRIBUTE = "pathgrade.risk_tier"
RISK_TIERS: tuple[RiskTier, ...] = ("low", "medium", "high")


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What one detector run over one trace found, and the alerts not sent before."""

    due: DueTrace
    service: str
    agent: str
    conversation_id: str
    risk_tier: RiskTier
    findings: list[Finding]  # every finding the policy alerts on
    new_alerts: list[Alert]  # those whose key this trace has not alerted on before


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


def _head(trace: Trace) -> Span:
    """The root span, else the earliest span (a trace evaluated before its root arrived)."""
    return trace.root or trace.spans[0]


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


class TraceEvaluator:
    """Policy resolution, conversation history, detector run and alert de-duplication."""

    def __init__(
        self,
        policy: Policy,
        policy_name: str = "default",
        conversations: int = 10_000,
        turns_per_conversation: int = 8,
        traces_remembered: int = 10_000,
    ) -> None:
        self.policy = policy
        self.policy_name = policy_name
        self.turns_per_conversation = turns_per_conversation
        self._resolved: dict[tuple[str, str, RiskTier], ResolvedPolicy] = {}
        self._conversations = _Lru(conversations)  # (tenant, id) -> [Trace | RemoteTurn]
        self._alerted = _Lru(traces_remembered)  # (tenant, trace id) -> set of finding keys
        self._views = ViewCache(traces_remembered)  # each turn indexed once, reused as history
        self.duplicates_suppressed = 0

    def risk_tier(self, root: Span, service: str, agent: str) -> RiskTier:
        """Policy tier, else a valid `pathgrade.risk_tier` on the root span, else medium."""
        tier = policy_risk_tier(self.policy, service, agent)
        if tier is not None:
            return tier
        hinted = root.attributes.get(RISK_TIER_ATTRIBUTE)
        return hinted if hinted in RISK_TIERS else DEFAULT_RISK_TIER

    def resolve(self, service: str, agent: str, tier: RiskTier) -> ResolvedPolicy:
        key = (service, agent, tier)
        if key not in self._resolved:
            self._resolved[key] = self.policy.resolve(service, agent, tier)
        return self._resolved[key]

    def evaluate(self, due: DueTrace, now_ns: int) -> Evaluation:
        """Run the detectors over `due.trace`; alerts only for findings not alerted before."""
        trace = due.trace
        head = _head(trace)
        service, agent = head.service_name, head.genai.agent_name
        conversation = next(
            (s.genai.conversation_id for s in trace.spans if s.genai.conversation_id), ""
        )
        tier = self.risk_tier(head, service, agent)
        resolved = self.resolve(service, agent, tier)
        history = self._history(trace, conversation)
        findings = [
            f for f in run_detectors(trace, resolved, resolved.context(history, self._views))
            if resolved.should_alert(f)
        ]  # fmt: skip
        seen = self._alerted.get((trace.tenant, trace.trace_id)) or set()
        fresh = [f for f in findings if f.key not in seen]
        self.duplicates_suppressed += len(findings) - len(fresh)
        self._alerted.put((trace.tenant, trace.trace_id), seen | {f.key for f in fresh})
        end_ns = head.end_ns if trace.root else max(s.end_ns for s in trace.spans)
        alerts = [
            Alert(
                alert_key=f.key,
                code=f.code,
                name=f.name,
                severity=f.severity,
                kind=f.kind,
                reason=f.reason,
                trace_id=trace.trace_id,
                span_id=f.span_id,
                tenant=trace.tenant,
                service=service,
                agent=agent,
                conversation_id=conversation,
                risk_tier=tier,
                policy=self.policy_name,
                details=f.details,
                incomplete=due.incomplete,
                trace_start_ns=min(s.start_ns for s in trace.spans),
                trace_end_ns=end_ns,
                detected_at_ns=now_ns,
            )
            for f in fresh
        ]
        return Evaluation(due, service, agent, conversation, tier, findings, alerts)

    def remember(self, turn: RemoteTurn) -> None:
        """Keep a turn another consumer evaluated, for later turns of its conversation."""
        key = (turn.tenant, turn.conversation_id)
        others = [t for t in self._conversations.get(key, []) if t.trace_id != turn.trace_id]
        self._keep(key, others, turn)

    def _history(self, trace: Trace, conversation: str) -> list[Trace]:
        """Turns of the conversation that started before this one, oldest first; records
        this trace as the conversation's latest turn (remote turns are decoded once, here)."""
        if not conversation:
            return []
        key = (trace.tenant, conversation)
        others = [
            t for t in map(_decoded, self._conversations.get(key, []))
            if t is not None and t.trace_id != trace.trace_id
        ]  # fmt: skip
        self._keep(key, others, trace)
        start = trace.spans[0].start_ns
        return sorted(
            (t for t in others if t.spans and t.spans[0].start_ns < start),
            key=lambda t: t.spans[0].start_ns,
        )

    def _keep(
        self, key: tuple[str, str], others: Sequence[Trace | RemoteTurn], latest: Trace | RemoteTurn
    ) -> None:
        """The conversation's turns: `others`, then `latest`, at most the configured count."""
        self._conversations.put(key, [*others, latest][-self.turns_per_conversation :])


def _decoded(turn: Trace | RemoteTurn) -> Trace | None:
    """A cached turn as a trace; None (logged) for a remote turn that does not decode."""
    if isinstance(turn, Trace):
        return turn
    try:
        return turn.decode()
    except ValueError as exc:
        log.error("conversation %s: turn %s from pathgrade.turns skipped: %s",
                  turn.conversation_id, turn.trace_id, exc)  # fmt: skip
        return None
