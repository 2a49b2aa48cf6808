"""Which tools were called and how: PG102 forbidden, PG103 required, PG104 schema,
PG105 allowed values, PG106 ordering, PG107 loop signature."""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from pathgrade.detectors.finding import Finding
from pathgrade.detectors.jsonschema_subset import validate, validate_skeleton
from pathgrade.detectors.registry import ListParams, Params, Rule, RuleDoc
from pathgrade.detectors.view import DetectorContext, ToolCall, TraceView
from pydantic import Field


class ToolNamesParams(ListParams):
    """A set of tool names (a policy may write it as a bare list)."""

    shorthand: ClassVar[str] = "tools"
    tools: frozenset[str] = Field(
        frozenset(), description="Tool names (forbidden for PG102, required for PG103)."
    )


FORBIDDEN = Rule(
    code="PG102",
    layer="safety",
    name="forbidden-tool-called",
    severity="high",
    doc=RuleDoc(
        finds=(
            "A call of a tool this service or agent must never call (for example an "
            "admin tool left in a shared toolset). Quiet when the policy lists no "
            "forbidden tools."
        ),
        why=(
            "A forbidden tool that runs once has already done its harm; the policy "
            "states the boundary and this rule reports every crossing."
        ),
        undecided="Never: tool names are always recorded.",
        fires="The policy forbids `drop_table` and the agent calls it.",
        quiet="The agent calls only tools the policy does not list.",
        capture_off="tool names.",
        capture_on="the same.",
    ),
    params=ToolNamesParams,
    policy_key="forbidden_tools",
    reads="execute_tool spans: tool name",
)


@FORBIDDEN.check
def forbidden_tool_called(
    view: TraceView, params: ToolNamesParams, context: DetectorContext
) -> list[Finding]:
    """Each call of a forbidden tool."""
    return [
        FORBIDDEN.violation(
            view, f"Forbidden tool {call.name} was called.", call.span.span_id, {"tool": call.name}
        )
        for call in view.tool_calls
        if call.name in params.tools
    ]


REQUIRED = Rule(
    code="PG103",
    name="required-tool-not-called",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "A tool the policy requires on every turn (for example `verify_identity`) "
            "that was never called, reported once per missing tool on the turn's top span. "
            "Quiet when the policy lists no required tools."
        ),
        why=(
            "A required step that is skipped (identity check, policy lookup) leaves the "
            "rest of the turn acting on unchecked ground."
        ),
        undecided="Never: tool names are always recorded.",
        fires=("The policy requires `verify_identity` and the turn calls only `lookup_order`."),
        quiet="The turn calls `verify_identity`, in any position.",
        capture_off="tool names.",
        capture_on="the same.",
    ),
    params=ToolNamesParams,
    policy_key="required_tools",
    reads="execute_tool spans: tool name",
)


@REQUIRED.check
def required_tool_not_called(
    view: TraceView, params: ToolNamesParams, context: DetectorContext
) -> list[Finding]:
    """Each required tool with no call in the turn."""
    called = {call.name for call in view.tool_calls}
    return [
        REQUIRED.violation(
            view,
            f"Required tool {name} was not called.",
            details={"tool": name},
            identifying=("tool",),
        )
        for name in sorted(params.tools - called)
    ]


class SchemaParams(Params):
    """Tool JSON Schemas by tool name; they override `gen_ai.tool.definitions`."""

    schemas: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description=(
            "JSON Schema of each tool's arguments, by tool name; overrides "
            "`gen_ai.tool.definitions`."
        ),
    )
    use_tool_definitions: bool = Field(
        True, description="Also read schemas from `gen_ai.tool.definitions` on the model spans."
    )


SCHEMA = Rule(
    code="PG104",
    name="tool-arguments-schema",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "Tool arguments that do not validate against the tool's JSON Schema (type, "
            "required, properties, additionalProperties, items, enum, const, bounds, "
            "lengths, pattern). Schemas come from the policy, else from "
            "`gen_ai.tool.definitions` on the model spans."
        ),
        why=(
            "A call with malformed arguments either fails downstream or, worse, succeeds "
            "with a value the tool's author never meant to accept."
        ),
        undecided=(
            "Uncaptured arguments are checked on the collector's skeleton of them (keys, "
            "types, lengths); a keyword that needs the value (enum, const, bounds, "
            "pattern), or a called tool with no schema once any schema is known, makes "
            "the check cannot-decide."
        ),
        fires=(
            "The schema of `issue_refund` requires `order_id` and the call carries only `amount`."
        ),
        quiet=(
            "Every call carries the required keys with the declared types, or no schema "
            "is known at all."
        ),
        capture_off=(
            "the collector's skeleton of the arguments (keys, JSON types, lengths): "
            "types, required, properties, additionalProperties, items and string lengths "
            "decide; a keyword that needs the value (enum, const, bounds, pattern) is a "
            "coverage gap."
        ),
        capture_on="the captured arguments (scrubbed), every keyword.",
    ),
    params=SchemaParams,
    policy_key="tool_schemas",
    reads="execute_tool spans: tool name, arguments, else pathgrade.facts.tool.args (`skeleton`); "
    "chat spans: gen_ai.tool.definitions",
)


@SCHEMA.check
def tool_arguments_schema(
    view: TraceView, params: SchemaParams, context: DetectorContext
) -> list[Finding]:
    """Schema violations per call; cannot-decide for calls without schema or arguments."""
    schemas = {**(view.tool_definitions if params.use_tool_definitions else {}), **params.schemas}
    if not schemas:
        return []
    findings, no_schema, no_arguments = [], [], []
    for call in view.tool_calls:
        schema = schemas.get(call.name)
        if schema is None:
            no_schema.append(call)
            continue
        errors, unchecked = _schema_errors(call, schema)
        if errors:
            findings.append(
                SCHEMA.violation(
                    view,
                    f"Arguments of {call.name} violate its schema: {errors[0]}.",
                    call.span.span_id,
                    {"tool": call.name, "errors": errors},
                )
            )
        elif unchecked:
            no_arguments.append(call)
    if no_schema:
        findings.append(
            SCHEMA.calls_undecided(view, no_schema, "tool_schema", "No JSON Schema for tool(s)")
        )
    if no_arguments:
        findings.append(
            SCHEMA.calls_undecided(
                view, no_arguments, "tool_arguments", "Arguments not captured for tool(s)"
            )
        )
    return findings


def _schema_errors(call: ToolCall, schema: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(violations, what could not be checked) of one call against its schema."""
    if call.arguments is not None:
        return validate(call.arguments, schema), []
    if call.skeleton is not None:
        return validate_skeleton(call.skeleton, schema)
    return [], ["$: arguments"]


class ArgumentRule(Params):
    """Allowed values and numeric bounds of one argument."""

    values: list[Any] | None = Field(None, description="The values allowed (None: any).")
    minimum: float | None = Field(None, description="Smallest number allowed (None: no bound).")
    maximum: float | None = Field(None, description="Largest number allowed (None: no bound).")


class AllowedValuesParams(Params):
    """Argument rules by tool name, then argument name."""

    tools: dict[str, dict[str, ArgumentRule]] = Field(
        default_factory=dict, description="Argument rules by tool name, then argument name."
    )


ALLOWED = Rule(
    code="PG105",
    name="argument-not-allowed",
    severity="high",
    doc=RuleDoc(
        finds=(
            "A tool argument outside the values or bounds the policy allows (for example "
            "a refund `amount` above 500, or a `plan` not in the sellable list). "
            "Arguments absent from the call are left to PG104."
        ),
        why=(
            "Schemas say what shape a value has; business limits (how much may be "
            "refunded, which plans may be sold) are the policy's, and an agent that "
            "exceeds them acts beyond its mandate."
        ),
        undecided=(
            "The check needs the values: cannot decide when a governed argument is "
            "present but the tool's arguments were not captured (a coverage gap, closed "
            "by capturing that tool)."
        ),
        fires="The policy caps `issue_refund.amount` at 500 and the call asks for 900.",
        quiet="The call asks for 20, or does not carry `amount` at all.",
        capture_off=(
            "nothing that decides: when a governed argument is in the call (its name is "
            "in the facts) the check is a coverage gap, closed by capturing that tool; a "
            "call without the governed argument is decided."
        ),
        capture_on="the captured values (an e-mail or card value reads as its mark).",
    ),
    params=AllowedValuesParams,
    policy_key="allowed_arguments",
    reads="execute_tool spans: tool name, arguments (argument names from "
    "pathgrade.facts.tool.args when not captured)",
)


@ALLOWED.check
def argument_not_allowed(
    view: TraceView, params: AllowedValuesParams, context: DetectorContext
) -> list[Finding]:
    """Each argument value outside its rule."""
    findings, uncaptured = [], []
    for call in view.tool_calls:
        rules = params.tools.get(call.name)
        if not rules:
            continue
        if call.arguments is None:
            if not call.arguments_known or call.argument_names() & rules.keys():
                uncaptured.append(call)
            continue
        for argument, rule in rules.items():
            if argument in call.arguments and (
                problem := _rule_problem(call.arguments[argument], rule)
            ):
                findings.append(
                    ALLOWED.violation(
                        view,
                        f"{call.name}({argument}) {problem}.",
                        call.span.span_id,
                        {"tool": call.name, "argument": argument, "problem": problem},
                        ("tool", "argument"),
                    )
                )
    if uncaptured:
        findings.append(
            ALLOWED.calls_undecided(
                view, uncaptured, "tool_arguments", "Arguments not captured for tool(s)"
            )
        )
    return findings


def _rule_problem(value: Any, rule: ArgumentRule) -> str:
    """Why `value` breaks `rule`, or "" when it does not."""
    if rule.values is not None and value not in rule.values:
        return f"is not one of {rule.values!r}"
    bounded = rule.minimum is not None or rule.maximum is not None
    if bounded and (not isinstance(value, int | float) or isinstance(value, bool)):
        return "is not a number"
    if rule.minimum is not None and value < rule.minimum:
        return f"is below the minimum {rule.minimum:g}"
    if rule.maximum is not None and value > rule.maximum:
        return f"is above the maximum {rule.maximum:g}"
    return ""


class OrderRule(Params):
    """`before` must have been called (in this turn or an earlier one) before `after`."""

    before: str = Field(description="The tool that must have succeeded first.")
    after: str = Field(description="The tool that may only run after it.")


class OrderingParams(ListParams):
    """Ordering constraints between tools."""

    shorthand: ClassVar[str] = "rules"
    rules: list[OrderRule] = Field(
        default_factory=list, description="Ordering constraints between tools."
    )


ORDERING = Rule(
    code="PG106",
    name="ordering-broken",
    severity="high",
    doc=RuleDoc(
        finds=(
            "A tool called before the tool that must precede it (for example "
            "`issue_refund` with no earlier `lookup_order` in this turn or an earlier "
            "turn of the conversation). Failed calls of the earlier tool do not count."
        ),
        why=("An action taken before the check it depends on acts on facts nobody looked up."),
        undecided="Never: tool names, status and times are always recorded.",
        fires=(
            "The policy orders `lookup_order` before `issue_refund` and the turn calls "
            "`issue_refund` first."
        ),
        quiet=(
            "`lookup_order` succeeds in this turn or an earlier one before `issue_refund` runs."
        ),
        capture_off="tool names, status and times.",
        capture_on="the same.",
    ),
    params=OrderingParams,
    policy_key="ordering",
    reads="execute_tool spans of this and earlier turns: tool name, start/end time, status",
)


@ORDERING.check
def ordering_broken(
    view: TraceView, params: OrderingParams, context: DetectorContext
) -> list[Finding]:
    """Each call of an `after` tool with no successful earlier `before` call."""
    earlier = {name for turn in context.history for name in turn.succeeded_tools}
    findings = []
    for rule in params.rules:
        for call in (c for c in view.tool_calls if c.name == rule.after):
            preceded = rule.before in earlier or any(
                c.name == rule.before and not c.failed and c.span.end_ns <= call.span.start_ns
                for c in view.tool_calls
            )
            if not preceded:
                findings.append(
                    ORDERING.violation(
                        view,
                        f"{rule.after} was called without an earlier {rule.before}.",
                        call.span.span_id,
                        {"before": rule.before, "after": rule.after},
                        ("before", "after"),
                    )
                )
    return findings


class LoopParams(Params):
    """How many identical calls (same name and arguments) are allowed in one turn."""

    max_repeats: int = Field(
        default=3, ge=1, description="Most calls of one tool with identical arguments in one turn."
    )


LOOP = Rule(
    code="PG107",
    name="loop-signature",
    severity="medium",
    doc=RuleDoc(
        finds=(
            "The same tool called with identical arguments more than `max_repeats` times "
            "in one turn. Arguments are compared canonically (key order does not matter; "
            "idempotency-key arguments are ignored), by the collector's fingerprints "
            "when it recorded them, else by the captured values."
        ),
        why=(
            "An agent that repeats the same call is looping: it burns tokens and time "
            "and will not reach an answer by itself."
        ),
        undecided=(
            "Cannot decide when a tool is repeated too often but its arguments were "
            "neither captured nor fingerprinted."
        ),
        fires=('`search` is called four times with `{"q": "x"}` (the default allows three).'),
        quiet="`search` is called four times with four different queries.",
        capture_off=(
            "fingerprints of each argument (`pathgrade.facts.tool.args`), idempotency "
            "arguments left out."
        ),
        capture_on=(
            "the fingerprints still (they were taken before scrubbing, so two e-mail "
            "addresses never look alike); the captured values only for spans without "
            "facts."
        ),
    ),
    params=LoopParams,
    policy_key="loop",
    reads="execute_tool spans: tool name, pathgrade.facts.tool.args, else arguments",
)


@LOOP.check
def loop_signature(view: TraceView, params: LoopParams, context: DetectorContext) -> list[Finding]:
    """One finding per repeated signature, on its first call beyond the limit."""
    if len(view.tool_calls) <= params.max_repeats:  # most turns: nothing can repeat enough
        return []
    counts = Counter(c.signature for c in view.tool_calls if c.signature is not None)
    findings = []
    for signature, count in counts.items():
        if count > params.max_repeats:
            calls = [c for c in view.tool_calls if c.signature == signature]
            findings.append(
                LOOP.violation(
                    view,
                    f"{calls[0].name} was called {count} times with identical arguments "
                    f"(limit {params.max_repeats}).",
                    calls[params.max_repeats].span.span_id,
                    {"tool": calls[0].name, "count": count, "signature": signature},
                    ("signature",),
                )
            )
    uncaptured = Counter(c.name for c in view.tool_calls if c.signature is None)
    repeated = [c for c in view.tool_calls if uncaptured.get(c.name, 0) > params.max_repeats]
    if repeated:
        findings.append(
            LOOP.calls_undecided(
                view, repeated, "tool_arguments", "Arguments not captured for repeated tool(s)"
            )
        )
    return findings
