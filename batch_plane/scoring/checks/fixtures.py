"""Fixture attempts: a check's passing and failing examples, written as data.

A `FixtureAttempt` describes one agent turn (its tool calls in order, its final answer,
one model call's tokens and finish reason, its latency) and builds the canonical trace an
instrumented agent would have produced for it (or, with a fact key, the trace the
collector stores on default privacy settings), so a fixture runs through the same
`TraceView`, detectors and checks as a real attempt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pathgrade.batch_plane.scoring.checks.registry import AttemptEvidence
from pathgrade.content.facts_producer import compute_facts
from pathgrade.content.fingerprints import TenantKey
from pathgrade.content.pii import PiiScanner
from pathgrade.detectors import default_policy, run_detectors
from pathgrade.schemas import genai
from pathgrade.schemas.model import GenAIFields, Span, Trace

FixtureCall = tuple[str, dict[str, Any] | None]
"""(tool name, arguments); None arguments: not captured."""
_START_NS = 1_700_000_000_000_000_000
_TRACE_ID = "f" * 32
_AGENT = "fixture-agent"


@dataclass(frozen=True, slots=True)
class FixtureAttempt:
    """One described agent turn; `evidence()` builds its trace and findings."""

    calls: tuple[FixtureCall, ...] = ()
    answer: str = "Done."
    tokens: tuple[int, int] = (100, 20)
    model: str = "gpt-4o-mini"
    finish_reason: str = "stop"
    latency_ms: float = 100.0
    turn_kind: str = "action"

    def trace(self) -> Trace:
        """The canonical trace: an invoke_agent root, one chat span, one span per call."""
        end = _START_NS + int(self.latency_ms * 1e6)
        text = {"type": "text", "content": self.answer}
        output = json.dumps([{"role": "assistant", "parts": [text]}])
        root = _span("0", "", f"invoke_agent {_AGENT}", _START_NS, end)
        root.genai = GenAIFields(operation=genai.OP_INVOKE_AGENT, agent_name=_AGENT)
        root.attributes[genai.PG_TURN_KIND] = self.turn_kind
        chat = _span("1", "0", f"chat {self.model}", _START_NS + 1, _START_NS + 2)
        chat.genai = GenAIFields(
            operation=genai.OP_CHAT, provider_name="openai", request_model=self.model,
            response_model=self.model, input_tokens=self.tokens[0], output_tokens=self.tokens[1],
            finish_reasons=[self.finish_reason], output_messages=output,
        )  # fmt: skip
        spans = [root, chat]
        for number, (name, arguments) in enumerate(self.calls, start=2):
            tool = _span(f"{number:x}", "0", f"execute_tool {name}", _START_NS + 2 * number,
                         _START_NS + 2 * number + 1)  # fmt: skip
            tool.genai = GenAIFields(
                operation=genai.OP_EXECUTE_TOOL, tool_name=name, tool_call_id=f"call-{number}",
                tool_arguments=json.dumps(arguments) if arguments is not None else "",
            )  # fmt: skip
            spans.append(tool)
        return Trace("default", _TRACE_ID, spans)

    def redacted_trace(self, key: TenantKey) -> Trace:
        """The trace as the collector stores it on default privacy settings: the facts
        computed from the raw content with the tenant's `key`, the content dropped."""
        trace = self.trace()
        scanner = PiiScanner()
        for span in trace.spans:
            span.attributes.update(compute_facts(span.genai, span.attributes, key, scanner))
            span.genai.tool_arguments = span.genai.output_messages = ""
        return trace

    def evidence(self, key: TenantKey | None = None) -> AttemptEvidence:
        """The attempt as a check sees it, under the default policy; with the tenant's
        `key`, on default privacy settings (`redacted_trace`) with that key to compare."""
        trace = self.trace() if key is None else self.redacted_trace(key)
        policy = default_policy().resolve()
        context = policy.context()
        findings = tuple(run_detectors(trace, policy, context))
        view = context.view_of(trace)
        return AttemptEvidence(view, context, self.answer, findings, frozenset(policy.params), key)


def _span(span_id: str, parent: str, name: str, start_ns: int, end_ns: int) -> Span:
    return Span(
        tenant="default", trace_id=_TRACE_ID, span_id=span_id.rjust(16, "0"),
        parent_span_id=parent.rjust(16, "0") if parent else "", name=name, kind="Internal",
        start_ns=start_ns, end_ns=end_ns,
    )  # fmt: skip
