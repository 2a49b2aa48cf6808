"""GenAI events of a turn, read in one place whatever carries them.

Events arrive as span events today (`Span.events`); OpenTelemetry now also writes events as
log records tied to a span, which pathgrade will read as a second carrier (issue 40): each
reader here takes the events of the spans it is given, so a carrier added later feeds the
same readers.

- `tool_call_decisions`: the `gen_ai.tool.call.decision` events (semantic-conventions-genai
  pull request #535, proposed and not merged; `genai.GENAI_CONVENTIONS`): an explicit
  decision on a proposed tool call before it runs, `gen_ai.tool.call.decision.outcome`
  allow / deny / require_approval, correlated with the call by `gen_ai.tool.call.id` (and
  naming the tool, `gen_ai.tool.name`, when the producer knows it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from pathgrade.schemas import genai
from pathgrade.schemas.model import Span


class ToolCallDecision(NamedTuple):
    """One decision on a proposed tool call, and the span whose event recorded it."""

    time_ns: int
    outcome: str  # allow, deny or require_approval
    tool_call_id: str  # "" when the producer did not know it
    tool_name: str  # "" likewise
    span_id: str


def tool_call_decisions(spans: Iterable[Span]) -> list[ToolCallDecision]:
    """The tool-call decisions recorded on `spans`, in time order; an event whose outcome
    is not one of the three is not a decision."""
    found = []
    for span in spans:
        for event in span.events:
            if event.name != genai.EVENT_TOOL_CALL_DECISION:
                continue
            attributes = event.attributes
            outcome = attributes.get(genai.TOOL_CALL_DECISION_OUTCOME)
            if outcome not in genai.DECISION_OUTCOMES:
                continue
            call_id = _text(attributes.get(genai.TOOL_CALL_ID))
            tool = _text(attributes.get(genai.TOOL_NAME))
            found.append(ToolCallDecision(event.time_ns, str(outcome), call_id, tool, span.span_id))
    found.sort()
    return found


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
