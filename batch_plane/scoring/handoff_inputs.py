"""What the `handoff_context` rubric reads from a trace: each hand-off between two agents
(`content.handoffs`), with what the sending agent had learned (its calls before the
hand-off), what the hand-off carried (the arguments of the call that carried it, where the
trace shows one) and what the receiving agent then did and said."""

from __future__ import annotations

from typing import Any

from pathgrade.content.messages import assistant_text, parse_messages
from pathgrade.detectors.view import ToolCall, TraceView
from pathgrade.schemas import genai
from pathgrade.schemas.json_text import parse_json


def handoff_inputs(view: TraceView) -> list[dict[str, Any]]:
    """One entry per hand-off of the turn, in order; [] for a single-agent turn."""
    flow = view.handoff_flow
    entries = []
    for handoff in flow.handoffs:
        sender, receiver = flow.sender(handoff), flow.receiver(handoff)
        carried = handoff.call.genai.tool_arguments if handoff.call is not None else ""
        said = [
            assistant_text(parse_messages(span.genai.output_messages))
            for span in receiver.spans
            if span.genai.operation in genai.MODEL_OPERATIONS
        ]
        entries.append(
            {
                "from": sender.agent,
                "to": receiver.agent,
                "kind": handoff.kind,
                "sender_calls": [
                    _call(c) for c in view.calls_of(sender) if c.span.start_ns <= receiver.start_ns
                ],
                "passed": parse_json(carried) if carried else None,
                "receiver_calls": [_call(c) for c in view.calls_of(receiver)],
                "receiver_said": [text for text in said if text],
            }
        )
    return entries


def _call(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "arguments": call.arguments}
