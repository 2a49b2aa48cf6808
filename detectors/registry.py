"""The detector registry: each rule has a stable code, a name, a severity, a doc and params."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pathgrade.detectors.finding import Finding, Severity
from pathgrade.detectors.view import DetectorContext, ToolCall, TraceView
from pydantic import BaseModel, ConfigDict, model_validator


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


@dataclass(slots=True)
class Rule:
    """A detector's identity (code, name, severity, doc, params, policy key) and function.

    `policy_key` is the key under which a policy section carries this rule's params.
    `reads` says which span shapes and attributes the rule looks at (for the catalogue).
    """

    code: str
    name: str
    severity: Severity
    doc: str
    params: type[Params]
    policy_key: str
    reads: str
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
        """A `violation` finding of this rule (on the root span when `span_id` is empty)."""
        return self._finding(view, "violation", reason, span_id, details or {}, identifying)

    def cannot_decide(
        self, view: TraceView, missing: str, reason: str, span_ids: list[str] | None = None
    ) -> Finding:
        """A `cannot_decide` finding naming what is `missing`, at trace level."""
        details = {"missing": missing, "span_ids": span_ids or []}
        return self._finding(view, "cannot_decide", reason, "", details, ("missing",))

    def calls_undecided(
        self, view: TraceView, calls: list[ToolCall], missing: str, prefix: str
    ) -> Finding:
        """A cannot-decide finding for `calls`: "<prefix>: <tool names>." with their spans."""
        names = ", ".join(sorted({c.name for c in calls}))
        return self.cannot_decide(
            view, missing, f"{prefix}: {names}.", [c.span.span_id for c in calls]
        )

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
            span_id=span_id or view.root_span_id,
            details=details,
            identifying=identifying,
        )


REGISTRY: dict[str, Rule] = {}


def rule_by_code_or_name(key: str) -> Rule:
    """The rule whose code or name is `key`; KeyError names the unknown key."""
    for rule in REGISTRY.values():
        if key in (rule.code, rule.name):
            return rule
    raise KeyError(f"unknown detector {key!r}")
