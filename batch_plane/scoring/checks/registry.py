"""The checks registry: each per-case check has a name, a params model that refuses unknown
keys, a one-paragraph doc, a fixture it passes and one it fails, and its function.

A check reads one attempt (`AttemptEvidence`: the trace as the detectors index it, the
detector context, the agent's final answer and the detector findings) and returns a
`CheckOutcome`: passed, failed with a reason that says exactly what went wrong, or could
not decide (what it needed was not captured) with the reason why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pathgrade.content.fingerprints import TenantKey
from pathgrade.detectors import DetectorContext, Finding, TraceView
from pathgrade.detectors.registry import Params, Rule
from pathgrade.schemas.layers import Layer
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt


class CheckParams(BaseModel):
    """Base of every check's params model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """A check's verdict on one attempt: `passed` True, False, or None (cannot decide)."""

    passed: bool | None
    reason: str = ""  # what went wrong, or what was missing to decide; "" when it passed

    @classmethod
    def ok(cls) -> CheckOutcome:
        return cls(True)

    @classmethod
    def fail(cls, reason: str) -> CheckOutcome:
        return cls(False, reason)

    @classmethod
    def undecided(cls, reason: str) -> CheckOutcome:
        return cls(None, reason)


@dataclass(frozen=True, slots=True)
class AttemptEvidence:
    """What a check sees of one attempt: the trace indexed as the detectors index it
    (`view`), the detector context (conventions, price table, earlier turns), the final
    answer the agent returned to the harness, the findings of the policy's detectors and
    the tenant's fact key (None without the deployment's fact secret), which compares
    expected values with the collector's fingerprints of arguments not captured."""

    view: TraceView
    context: DetectorContext
    answer: str
    findings: tuple[Finding, ...] = ()
    enabled: frozenset[str] = frozenset()  # the detector codes the policy runs
    key: TenantKey | None = None


CheckFn = Callable[[Any, AttemptEvidence], CheckOutcome]


@dataclass(frozen=True, slots=True)
class Fixture:
    """Params and an attempt the check must pass (or fail) on: documentation and a test."""

    params: dict[str, Any]
    attempt: FixtureAttempt


@dataclass(slots=True)
class Check:
    """A check's identity (name, doc, params model), its two fixtures, the layer of the
    agent it grades (`schemas.layers`) and its function."""

    name: str
    doc: str
    params: type[BaseModel]  # refuses unknown keys (CheckParams, or a detector's Params)
    passing: Fixture
    failing: Fixture
    layer: Layer = "tool use"
    function: CheckFn | None = field(default=None, repr=False)

    def register(self, function: CheckFn) -> CheckFn:
        """Decorator: attach `function` to this check and register the check."""
        if self.name in CHECKS:
            raise ValueError(f"check {self.name} registered twice")
        self.function = function
        CHECKS[self.name] = self
        return function

    def run(self, params: BaseModel, evidence: AttemptEvidence) -> CheckOutcome:
        """The outcome of this check with `params` on one attempt."""
        assert self.function is not None, f"check {self.name} has no function"
        return self.function(params, evidence)


CHECKS: dict[str, Check] = {}


def detect(rule: Rule, params: Params, evidence: AttemptEvidence) -> list[Finding]:
    """The findings of one detector run with the check's own params on the attempt's trace:
    a check built on a detector is that detector's code, not a copy of it."""
    assert rule.function is not None, f"{rule.code} has no function"
    return rule.function(evidence.view, params, evidence.context)


def from_findings(findings: Iterable[Finding]) -> CheckOutcome:
    """Violations fail (their reasons joined); otherwise a cannot-decide finding leaves the
    check undecided; no finding passes."""
    found = list(findings)
    violations = [f.reason for f in found if f.kind == "violation"]
    if violations:
        return CheckOutcome.fail(" ".join(violations))
    undecided = [f.reason for f in found if f.kind == "cannot_decide"]
    return CheckOutcome.undecided(" ".join(undecided)) if undecided else CheckOutcome.ok()


def all_of(outcomes: Iterable[CheckOutcome]) -> CheckOutcome:
    """Three-valued AND: any failure fails (with every failure's reason), else anything
    undecided leaves it undecided, else it passes."""
    collected = list(outcomes)
    failures = [o.reason for o in collected if o.passed is False]
    if failures:
        return CheckOutcome.fail(" ".join(failures))
    undecided = [o.reason for o in collected if o.passed is None]
    return CheckOutcome.undecided(" ".join(undecided)) if undecided else CheckOutcome.ok()
