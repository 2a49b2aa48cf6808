"""Trace shape and run health: PG100 completeness, PG101 tool error, PG113 termination,
PG114 budgets."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pathgrade.content.messages import RequestedToolCall
from pathgrade.detectors.finding import Finding
from pathgrade.detectors.prices import cost_usd
from pathgrade.detectors.registry import Params, Rule, RuleDoc
from pathgrade.detectors.view import DetectorContext, TraceView
from pathgrade.schemas.model import Span
from pydantic import AliasChoices, Field


class CompletenessParams(Params):
    """What a complete turn must have."""

    require_agent_span: bool = Field(
        True,
        validation_alias=AliasChoices("require_agent_span", "require_root_agent"),
        description="Report a turn with no agent span (`require_root_agent`, its former "
        "name, is read too).",
    )
    require_tool_spans: bool = Field(
        True, description="Report a requested tool call with no `execute_tool` span."
    )
    require_token_usage: bool = Field(
        True, description="Report an inference span without input or output token counts."
    )


COMPLETENESS = Rule(
    code="PG100",
    name="trace-completeness",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "A turn that is not complete enough to grade: no agent span in it (a turn "
            "found without one: `invoke_agent`, `invoke_workflow`, "
            "`handle_conversation_turn`, OpenInference AGENT or a LangGraph graph root; "
            "never whether the trace's root is one), a tool call a model requested in "
            "`gen_ai.output.messages` (or, uncaptured, `tool_calls` of "
            "`pathgrade.facts.output`) that no span answers (an `execute_tool` span "
            "matched by `gen_ai.tool.call.id`, or by tool name for tool spans that carry "
            "no call id; or a handoff span, as the convention mapping pairs them: "
            '"handoff to billing" answers `transfer_to_billing`), or an inference span '
            "without token usage."
        ),
        why=(
            "A gap means lost spans or broken instrumentation, and every other verdict "
            "on the trace is weaker for it."
        ),
        undecided="Never: every check reads span shapes and counts, which are always present.",
        fires=(
            "A model call requests `lookup_order` (call id `c1`) and the trace holds no "
            "`execute_tool` span for it."
        ),
        quiet=(
            "Every requested call has its tool span and every chat span reports input "
            "and output tokens."
        ),
        capture_off=(
            "the turn's operations, token usage, tool spans' call ids and names and "
            "handoff spans' names (never content), and the tool calls each model call "
            "requested as the collector recorded them (`pathgrade.facts.output`: ids and "
            "names)."
        ),
        capture_on="the same, the requested calls read from the captured output messages.",
    ),
    params=CompletenessParams,
    policy_key="completeness",
    reads="the turn's spans: operation, OpenInference kind and metadata (agent span); "
    "chat spans: output messages (tool calls), else pathgrade.facts.output (`tool_calls`), "
    "token usage; execute_tool spans: tool call id, tool name; handoff spans: name",
)


@COMPLETENESS.check
def trace_completeness(
    view: TraceView, params: CompletenessParams, context: DetectorContext
) -> list[Finding]:
    """No agent span in the turn, unanswered requested tool calls, missing token usage."""
    findings = []
    if params.require_agent_span and not view.has_agent_span:
        top = view.top
        named = f"{top.name!r}, operation {top.genai.operation or 'none'}" if top else "none"
        findings.append(
            COMPLETENESS.violation(
                view,
                f"The turn has no agent span (its top span: {named}).",
                details={"problem": "no_agent_span"},
                identifying=("problem",),
            )
        )
    if params.require_tool_spans:
        findings += [
            COMPLETENESS.violation(
                view,
                f"Tool call {call.call_id} ({call.name}) was requested but has no "
                "execute_tool span.",
                span.span_id,
                {"problem": "missing_tool_span", "tool_call_id": call.call_id, "tool": call.name},
                ("problem", "tool_call_id"),
            )
            for span, call in _unexecuted(view)
        ]
    if params.require_token_usage:
        findings += [
            COMPLETENESS.violation(
                view,
                f"Inference span {span.name!r} has no token usage.",
                span.span_id,
                {"problem": "missing_token_usage"},
                ("problem",),
            )
            for span in view.chat_spans
            if span.genai.input_tokens is None or span.genai.output_tokens is None
        ]
    return findings


def _unexecuted(view: TraceView) -> list[tuple[Span, RequestedToolCall]]:
    """Requested tool calls (with an id) that no span answered (`requested_answers`:
    matched by call id, else by tool name against tool spans without a call id and
    against handoff spans, each span once)."""
    answers = zip(view.requested_tool_calls, view.requested_answers, strict=True)
    return [(span, call) for (span, call), answer in answers if call.call_id and answer is None]


class ToolErrorParams(Params):
    """Error types that are expected and not reported (e.g. a lookup that found nothing)."""

    ignore_error_types: frozenset[str] = Field(
        frozenset(),
        description=(
            "`error.type` values that are not reported (expected errors such as `not_found`)."
        ),
    )


TOOL_ERROR = Rule(
    code="PG101",
    name="tool-error",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "A tool call that ended in error (span status Error or an `error.type`), "
            "reported on the tool span so it can be read next to the answer."
        ),
        why="Agents that carry on after a failed tool often answer from nothing.",
        undecided="Never: span status and `error.type` are always there to read.",
        fires="`lookup_order` ends with `error.type` `timeout`.",
        quiet=(
            "Every tool span ends with status Ok, or only with an error type the policy "
            "lists in `ignore_error_types`."
        ),
        capture_off="span status and `error.type` (never content).",
        capture_on="the same.",
    ),
    params=ToolErrorParams,
    policy_key="tool_errors",
    reads="execute_tool spans: status code, error.type, tool name",
)


@TOOL_ERROR.check
def tool_error(view: TraceView, params: ToolErrorParams, context: DetectorContext) -> list[Finding]:
    """Each failed tool call whose error type is not ignored."""
    return [
        TOOL_ERROR.violation(
            view,
            f"Tool {call.name} failed ({call.span.genai.error_type or call.span.status_message}).",
            call.span.span_id,
            {"tool": call.name, "error_type": call.span.genai.error_type},
        )
        for call in view.tool_calls
        if call.failed and call.span.genai.error_type not in params.ignore_error_types
    ]


STEP_CAP_FINISH_REASONS = frozenset({"length", "max_tokens", "max_steps", "max_turns"})
STEP_CAP_ERROR = re.compile(
    r"max[_ ]?(steps|turns|iterations)|recursion[_ ]?limit|step[_ ]?limit", re.IGNORECASE
)


class TerminationParams(Params):
    """Finish reasons and error types that mean the run hit a cap instead of finishing."""

    cap_finish_reasons: frozenset[str] = Field(
        STEP_CAP_FINISH_REASONS,
        description="Finish reasons that mean the last model call stopped on a cap.",
    )


TERMINATION = Rule(
    code="PG113",
    name="no-clean-termination",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "A run that did not end cleanly: there is no final text response, the last "
            "model call stopped on a cap (finish reason `length`/`max_tokens`, or an "
            "error such as MaxTurnsExceeded or GraphRecursionError), or the turn's top span "
            "ended in error. An uncaptured final answer is judged by the collector's "
            "record of it (`text` of `pathgrade.facts.output`, finish reasons)."
        ),
        why="The user got a cut-off answer or none, whatever the tools did.",
        undecided="Cannot decide when no output messages were captured or recorded.",
        fires="The last chat span stops with finish reason `length`.",
        quiet="The last chat span answers with text and finish reason `stop`.",
        capture_off=(
            "the final answer's facts: text present, tool calls requested, finish "
            "reasons (`pathgrade.facts.output`)."
        ),
        capture_on="the captured output messages.",
    ),
    params=TerminationParams,
    policy_key="termination",
    reads="the turn's top span: status and error.type; chat spans: finish reasons, output "
    "messages, "
    "else pathgrade.facts.output",
)


@TERMINATION.check
def no_clean_termination(
    view: TraceView, params: TerminationParams, context: DetectorContext
) -> list[Finding]:
    """Root in error, a capped run, or no final answer."""
    root = view.top
    if root is not None and (root.status_code == "Error" or root.genai.error_type):
        problem = "step_cap" if STEP_CAP_ERROR.search(root.genai.error_type) else "error"
        return [_termination(view, problem, f"The run ended in error ({root.genai.error_type}).")]
    last_chat = max(view.chat_spans, key=lambda s: s.end_ns, default=None)
    if last_chat is not None and params.cap_finish_reasons & _finish_reasons(last_chat):
        return [_termination(view, "step_cap", "The last model call stopped on a cap.")]
    answer = view.answer
    if answer is None:
        return [
            TERMINATION.cannot_decide(
                view, "output_messages", "No output messages were captured to find a final answer."
            )
        ]
    if not answer.has_text:
        return [_termination(view, "no_final_answer", "The run ended without a final response.")]
    return []


def _finish_reasons(span: Span) -> set[str]:
    """The span's finish reasons, else the collector's record of them."""
    output = span.facts.output
    return set(span.genai.finish_reasons or (output.finish_reasons if output else ()))


def _termination(view: TraceView, problem: str, reason: str) -> Finding:
    return TERMINATION.violation(
        view, reason, details={"problem": problem}, identifying=("problem",)
    )


class BudgetParams(Params):
    """Per-turn budgets; an unset budget is not checked."""

    max_steps: int | None = Field(
        default=None, ge=0, description="Most model calls in one turn (None: no limit)."
    )
    max_tool_calls: int | None = Field(
        default=None, ge=0, description="Most tool calls in one turn (None: no limit)."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Most input plus output tokens in one turn (None: no limit).",
    )
    max_cost_usd: float | None = Field(
        default=None,
        ge=0,
        description=(
            "Most cost of one turn in USD, from tokens and the price table (None: no limit)."
        ),
    )
    max_latency_ms: float | None = Field(
        default=None,
        ge=0,
        description="Longest duration of the turn's top span in milliseconds (None: no limit).",
    )


BUDGET = Rule(
    code="PG114",
    name="budget-exceeded",
    severity="low",
    doc=RuleDoc(
        finds=(
            "A turn that used more than its budget: model calls (steps), tool calls, "
            "tokens, cost or latency (of its top span). Cost is token usage joined with "
            "pathgrade's versioned list price table (overridable), never a cost the "
            "agent reports."
        ),
        why=(
            "Runaway turns cost money and time long before they fail; a budget makes the "
            "limit explicit."
        ),
        undecided=(
            "An inference span whose model is not in the price table makes the cost "
            "check cannot-decide."
        ),
        fires="The policy allows 2 tool calls and the turn makes 3.",
        quiet=(
            "The turn stays within every budget the policy sets (no budget set: nothing to check)."
        ),
        capture_off="token counts, models and durations (never content).",
        capture_on="the same.",
    ),
    params=BudgetParams,
    policy_key="budgets",
    reads="chat spans: count, token usage, response/request model, provider; execute_tool "
    "span count; the turn's top span: duration",
)


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """What one turn used: model calls, tool calls, tokens, top-span latency and list-price
    cost (None, with the unpriced models named, when a model is not in the price table)."""

    steps: int
    tool_calls: int
    tokens: int
    latency_ms: float
    cost_usd: float | None
    unpriced: tuple[str, ...]


def turn_usage(view: TraceView, context: DetectorContext) -> TurnUsage:
    """The turn's usage, cost from the context's price table (what PG114 budgets and the
    offline efficiency metrics read)."""
    tokens = sum(
        (s.genai.input_tokens or 0) + (s.genai.output_tokens or 0) for s in view.chat_spans
    )
    total, unpriced = 0.0, []
    for span in view.chat_spans:
        model = span.genai.response_model or span.genai.request_model
        cost = cost_usd(
            model,
            span.genai.provider_name,
            span.genai.input_tokens or 0,
            span.genai.output_tokens or 0,
            context.prices,
        )
        if cost is None:
            unpriced.append(model or "<unnamed>")
        else:
            total += cost
    return TurnUsage(
        steps=len(view.chat_spans),
        tool_calls=len(view.tool_calls),
        tokens=tokens,
        latency_ms=view.top.duration_ns / 1e6 if view.top else 0.0,
        cost_usd=None if unpriced else total,
        unpriced=tuple(unpriced),
    )


@BUDGET.check
def budget_exceeded(
    view: TraceView, params: BudgetParams, context: DetectorContext
) -> list[Finding]:
    """One finding per exceeded budget (none set, as by default: nothing to compute)."""
    if all(getattr(params, budget) is None for budget in BudgetParams.model_fields):
        return []
    used = turn_usage(view, context)
    usage: dict[str, float | None] = {
        "max_steps": used.steps,
        "max_tool_calls": used.tool_calls,
        "max_tokens": used.tokens,
        "max_latency_ms": used.latency_ms,
    }
    findings = []
    if params.max_cost_usd is not None:
        usage["max_cost_usd"] = used.cost_usd
        if used.unpriced:
            findings.append(
                BUDGET.cannot_decide(
                    view, "model_price", f"No list price for model(s) {', '.join(used.unpriced)}."
                )
            )
    for budget, value in usage.items():
        limit = getattr(params, budget)
        if limit is not None and value is not None and value > limit:
            findings.append(
                BUDGET.violation(
                    view,
                    f"The turn used {value:g} against a budget of {limit:g} ({budget}).",
                    details={"budget": budget, "used": value, "limit": limit},
                    identifying=("budget",),
                )
            )
    return findings
