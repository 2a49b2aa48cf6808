"""Hallucination as two checks on one trace.

- Unsupported claims (judge, rubric `unsupported_claims`): claims of the final answer that
  no tool result supports.
- Claimed actions (deterministic): the realtime detector PG116 reused as is, claims of
  completed actions ("I have cancelled your order") with no successful matching tool call.
"""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.scoring.handoff_inputs import handoff_inputs
from pathgrade.content.messages import message_text, parse_messages
from pathgrade.detectors import REGISTRY, Finding, default_policy
from pathgrade.detectors.view import TraceView
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace

CLAIMED_ACTIONS_CODE = "PG116"


def claimed_action_findings(trace: Trace) -> list[Finding]:
    """PG116's findings on `trace` with the default policy's parameters."""
    resolved = default_policy().resolve()
    rule = REGISTRY[CLAIMED_ACTIONS_CODE]
    assert rule.function is not None
    context = resolved.context()
    params = resolved.params.get(CLAIMED_ACTIONS_CODE) or rule.params()
    return rule.function(TraceView(trace, context.conventions), params, context)


def claimed_actions_score(findings: list[Finding]) -> tuple[float | None, str, str]:
    """(value, label, explanation) of the claimed-actions check: 1.0 when every claimed
    action happened, 0.0 when one did not, None ("cannot_decide") without a final answer."""
    if any(f.kind == "cannot_decide" for f in findings):
        return None, "cannot_decide", "; ".join(f.reason for f in findings)
    if findings:
        return 0.0, "fail", "; ".join(f.reason for f in findings)
    return 1.0, "pass", "every claimed action has a successful matching tool call"


def judge_inputs(trace: Trace) -> dict[str, Any]:
    """What the rubrics read from a trace: the user's request, the final answer, the tool
    calls in order (name, arguments, result), the tool results alone and the hand-offs
    between its agents (`handoff_inputs`)."""
    view = TraceView(trace, default_policy().resolve().context().conventions)
    calls = [
        {"name": c.name, "arguments": c.arguments, "result": c.span.genai.tool_result}
        for c in view.tool_calls
    ]
    return {
        "question": _user_request(trace),
        "answer": view.final_answer or "",
        "tool_calls": calls,
        "tool_results": [{"tool": c["name"], "result": c["result"]} for c in calls],
        "handoffs": handoff_inputs(view),
    }


def _user_request(trace: Trace) -> str:
    """The last user message of the root's input, else of the first model call's input."""
    candidates = [trace.root] if trace.root else []
    candidates += [s for s in trace.spans if s.genai.operation in genai.MODEL_OPERATIONS]
    for span in candidates:
        users = [m for m in parse_messages(span.genai.input_messages) if m.get("role") == "user"]
        if users:
            return message_text(users[-1])
    return ""
