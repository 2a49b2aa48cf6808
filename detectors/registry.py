"""The detector registry: each rule has a stable code, a name, a severity, a stability, a
doc in fixed sections and a params model whose every field is described."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pathgrade.detectors.finding import Finding, Severity
from pathgrade.detectors.view import DetectorContext, ToolCall, TraceView
from pathgrade.schemas.layers import Layer
from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator


class Params(BaseModel):
    """Base of every detector's params model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ListParams(Params):
    """Params with one list field, which a policy may also write as a bare list."""

    shorthand: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _expand_shorthand(cls, value: Any) -> Any:
        return {cls.shorthand: value} if isinstance(value, list) else value


def regex_list(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Validator body: every item of `patterns` must compile as a regular expression."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"invalid regular expression {pattern!r}: {error}") from error
    return patterns


DetectorFn = Callable[[TraceView, Any, DetectorContext], list[Finding]]
Stability = Literal["stable", "preview"]
"""`stable`: code, name and finding shape are kept; `preview`: they may still change."""


@dataclass(frozen=True, slots=True)
class RuleDoc:
    """A rule's documentation in fixed sections (docs/detectors.md is rendered from them).

    `finds`: what it finds; `why`: why it matters; `undecided`: when it cannot decide
    ("Never: ..." when it always can); `fires` / `quiet`: an example that fires and one
    that does not; `capture_off` / `capture_on`: what it reads with the collector's
    default settings and with capture on; `notes`: further Markdown for the catalogue.
    """

    finds: str
    why: str
    undecided: str
    fires: str
    quiet: str
    capture_off: str
    capture_on: str
    notes: str = ""

    def __post_init__(self) -> None:
        for name in ("finds", "why", "undecided", "fires", "quiet", "capture_off", "capture_on"):
            if not getattr(self, name).strip():
                raise ValueError(f"RuleDoc.{name} is empty")

    @property
    def summary(self) -> str:
        """One paragraph: what it finds, why it matters, when it cannot decide."""
        return f"{self.finds} {self.why} {self.undecided}"


@dataclass(slots=True)
class Rule:
    """A detector's identity (code, name, severity, doc, params, policy key) and function.

    `policy_key` is the key under which a policy section carries this rule's params.
    `reads` says which span shapes and attributes the rule looks at (for the catalogue);
    `layer` is the layer of the agent it grades (`schemas.layers`).
    """

    code: str
    name: str
    severity: Severity
    doc: RuleDoc
    params: type[Params]
    policy_key: str
    reads: str
    stability: Stability = "stable"
    layer: Layer = "tool use"
    function: DetectorFn | None = field(default=None, repr=False)

    def check(self, function: DetectorFn) -> DetectorFn:
        """Decorator: attach `function` to this rule and register the rule."""
        if self.code in REGISTRY:
            raise ValueError(f"detector code {self.code} registered twice")
        self.function = function
        REGISTRY[self.code] = self
        return function

    def violation(
        self,
        view: TraceView,
        reason: str,
        span_id: str = "",
        details: dict[str, Any] | None = None,
        identifying: tuple[str, ...] = (),
    ) -> Finding:
        """A `violation` finding of this rule (on the turn's top span when `span_id` is
        empty)."""
        return self._finding(view, "violation", reason, span_id, details or {}, identifying)

    def cannot_decide(
        self,
        view: TraceView,
        missing: str,
        reason: str,
        span_ids: list[str] | None = None,
        tools: Iterable[str] = (),
    ) -> Finding:
        """A `cannot_decide` finding naming what is `missing` and how to close the gap
        (`close`: which tools to capture, which attribute to set), at trace level."""
        details = {
            "missing": missing,
            "span_ids": span_ids or [],
            "close": how_to_close(missing, sorted(set(tools))),
        }
        return self._finding(view, "cannot_decide", reason, "", details, ("missing",))

    def calls_undecided(
        self, view: TraceView, calls: list[ToolCall], missing: str, prefix: str
    ) -> Finding:
        """A cannot-decide finding for `calls`: "<prefix>: <tool names>." with their spans."""
        names = sorted({c.name for c in calls})
        return self.cannot_decide(
            view, missing, f"{prefix}: {', '.join(names)}.", [c.span.span_id for c in calls],
            names,
        )  # fmt: skip

    def _finding(
        self,
        view: TraceView,
        kind: str,
        reason: str,
        span_id: str,
        details: dict[str, Any],
        identifying: tuple[str, ...],
    ) -> Finding:
        return Finding(
            code=self.code,
            name=self.name,
            severity=self.severity,
            kind=kind,  # type: ignore[arg-type]
            reason=reason,
            trace_id=view.trace_id,
            span_id=span_id or view.top_span_id,
            details=details,
            identifying=identifying,
        )


REGISTRY: dict[str, Rule] = {}

DETECTOR_ERROR = "detector_error"
"""What a rule that raised is missing: a working detector."""
ENCLOSING_SPAN = "enclosing_span"
"""What a turn graded before the span enclosing it came is missing (`Trace.context_pending`)."""
_CLOSE_GAP = {
    "tool_arguments": "capture the arguments of {tools} (collector `redaction.capture_tools`, "
    "`--capture-tools`)",
    "output_messages": "send the spans through pathgrade's collector (it records the final "
    "answer's facts) or capture messages (`redaction.capture_messages`)",
    "final_answer_text": "capture messages (`redaction.capture_messages`): the policy's "
    "patterns need the text",
    "untrusted_content": "send the spans through pathgrade's collector (it records what tool "
    "results and documents said) or capture the results of {tools}",
    "turn_kind": "name what users' requests for the writes look like (policy `requests`) "
    "or set `pathgrade.turn.kind` (action or read) on the turn's agent span",
    "tool_schema": "give {tools} a JSON Schema (policy `tool_schemas`, or "
    "`gen_ai.tool.definitions` on the model spans)",
    "model_price": "add the model to the policy's `price_table`",
    DETECTOR_ERROR: "a detector failed on this trace: see the realtime plane's log",
    ENCLOSING_SPAN: "record the decision on the tool's span or the turn's agent span (the "
    "span enclosing the turn ends later: the turn is graded again when it comes)",
}


def how_to_close(missing: str, tools: list[str]) -> str:
    """How a deployment closes a gap of kind `missing` (for coverage reports)."""
    text = _CLOSE_GAP.get(missing)
    if text is None:  # an identity attribute
        return f"set `{missing}` on the turn's agent span or a span enclosing it"
    return text.format(tools=", ".join(tools) or "the tools involved")


def rule_by_code_or_name(key: str) -> Rule:
    """The rule whose code or name is `key`; KeyError names the unknown key."""
    for rule in REGISTRY.values():
        if key in (rule.code, rule.name):
            return rule
    raise KeyError(f"unknown detector {key!r}")


def _detector_code(key: str) -> str:
    try:
        return rule_by_code_or_name(key).code
    except KeyError as error:
        raise ValueError(error.args[0]) from error


DetectorRef = Annotated[str, AfterValidator(_detector_code)]
"""A detector named in a policy by code or name, validated to its code."""
