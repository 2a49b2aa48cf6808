"""The YAML policy: which detectors run, with which params, per service, agent and risk tier.

```yaml
version: 1
price_table: my-prices.json        # optional, relative to this file; overrides entries
defaults: {<section>}              # applies everywhere
tiers: {high: {<section>}}         # per risk tier (low, medium, high)
services:
  billing:
    <section fields>
    agents: {billing-agent: {<section>}}
agents: {triage-agent: {<section>}}
monitors: {<monitors>}             # alerts over windows of traffic (detectors.monitor_policy)
```

A section holds `risk_tier`, `tools` (reads/writes/irreversible), `identity`,
`idempotency`, `requests` (per write tool, regular expressions of a user's message that
asks for it), `enable`/`disable`/`required` (detector codes or names), `severity`
overrides, and each detector's params under its policy key (`budgets`, `ordering`, ...).
Sections merge field by field (`requests` tool by tool): defaults, then tier, then
service, then agent. Errors name the file, line and field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pathgrade.detectors.conventions import (
    Conventions,
    IdempotencyConfig,
    IdentityConfig,
    ToolEffects,
    checked_requests,
)
from pathgrade.detectors.finding import Finding, Severity
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.detectors.prices import PriceTable, load_price_table, shipped_price_table
from pathgrade.detectors.registry import REGISTRY, DetectorRef, Params
from pathgrade.detectors.view import DetectorContext
from pathgrade.schemas.turns import TurnDigest
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)

RiskTier = Literal["low", "medium", "high"]
RISK_TIERS: tuple[RiskTier, ...] = ("low", "medium", "high")
DEFAULT_RISK_TIER: RiskTier = "medium"
POLICY_DIR_CONTEXT = "policy_dir"
"""Validation-context key: the policy file's directory, which relative paths in detector
params (PG118's graph file) are read from."""

# Built-in tier defaults: which checks' cannot-decide findings alert (user tiers add to it).
TIER_REQUIRED: dict[str, frozenset[str]] = {
    "low": frozenset(),
    "medium": frozenset({"PG111", "PG112"}),
    "high": frozenset({"PG100", "PG104", "PG108", "PG110", "PG111", "PG112", "PG117"}),
}


class SectionBase(BaseModel):
    """Fields every policy section has, besides the detectors' params."""

    model_config = ConfigDict(extra="forbid")

    risk_tier: RiskTier | None = Field(
        None, description="risk tier of the traces the section covers (low, medium, high)"
    )
    tools: ToolEffects | None = Field(None, description="tool names by effect (conventions)")
    identity: IdentityConfig | None = Field(
        None, description="where the session identity lives (conventions)"
    )
    idempotency: IdempotencyConfig | None = Field(
        None, description="where a tool call's idempotency key lives (conventions)"
    )
    requests: dict[str, tuple[str, ...]] | None = Field(
        None,
        description="per write tool, regular expressions of a user's message that asks for "
        "it (PG110 without `pathgrade.turn.kind`; the collector reads them from the same "
        "file: docs/collector.md)",
    )
    enable: list[DetectorRef] = Field([], description="detectors turned on (codes or names)")
    disable: list[DetectorRef] = Field([], description="detectors turned off (codes or names)")
    required: list[DetectorRef] = Field(
        [],
        description="detectors whose cannot-decide findings alert (on top of the tier's)",
    )
    severity: dict[DetectorRef, Severity] = Field(
        {}, description="severity overrides, detector -> low, medium, high or critical"
    )
    scorers: list[str] | None = Field(
        None, description="metrics the online scorer runs on the section's sampled traces"
    )

    @field_validator("requests")
    @classmethod
    def _requests_compile(
        cls, value: dict[str, tuple[str, ...]] | None
    ) -> dict[str, tuple[str, ...]] | None:
        return None if value is None else checked_requests(value)


@cache
def section_model() -> type[SectionBase]:
    """`SectionBase` plus one optional field per registered detector's policy key."""
    fields: dict[str, Any] = {
        rule.policy_key: (rule.params | None, None) for rule in REGISTRY.values()
    }
    return create_model("PolicySection", __base__=SectionBase, **fields)


@cache
def policy_document_model() -> type[BaseModel]:
    """The whole policy file's model (built after the registry is populated)."""
    section = section_model()
    service = create_model(
        "ServicePolicy",
        __base__=section,
        agents=(dict[str, section], {}),  # type: ignore[valid-type]
    )
    return create_model(
        "PolicyDocument",
        __config__=ConfigDict(extra="forbid"),
        version=(Literal[1], 1),
        price_table=(str | None, None),
        defaults=(section, section()),
        tiers=(dict[RiskTier, section], {}),  # type: ignore[valid-type]
        services=(dict[str, service], {}),  # type: ignore[valid-type]
        agents=(dict[str, section], {}),  # type: ignore[valid-type]
        monitors=(MonitorsPolicy, MonitorsPolicy()),
    )


class PolicyError(ValueError):
    """An invalid policy file; the message has one `file:line: field: reason` per problem."""


@dataclass(frozen=True, slots=True)
class ResolvedPolicy:
    """The policy for one (service, agent, risk tier): enabled detectors and their params."""

    risk_tier: RiskTier
    conventions: Conventions
    params: dict[str, Params]  # enabled detector code -> params, in code order
    required: frozenset[str]
    severities: dict[str, Severity] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=shipped_price_table)
    scorers: tuple[str, ...] | None = None  # None: the online scorer's tier default

    def context(self, history: Iterable[TurnDigest] = ()) -> DetectorContext:
        """A detector context for this policy with (digests of) earlier turns of the
        conversation."""
        return DetectorContext(self.conventions, self.prices, list(history))

    def should_alert(self, finding: Finding) -> bool:
        """Violations alert per trace; so do cannot-decide findings of the checks a high
        tier requires. Other cannot-decide findings are coverage gaps of the deployment,
        not incidents of the trace (the realtime plane reports them per service and
        detector, `realtime_plane.coverage`)."""
        return finding.kind == "violation" or (
            self.risk_tier == "high" and finding.code in self.required
        )


@dataclass(frozen=True, slots=True)
class Policy:
    """A validated policy document; `resolve` picks the sections that apply."""

    document: BaseModel
    prices: PriceTable

    @property
    def monitors(self) -> MonitorsPolicy:
        """The policy's `monitors:` section (none declared: an empty one)."""
        return self.document.monitors  # type: ignore[attr-defined]

    def resolve(
        self, service: str = "", agent: str = "", risk_tier: RiskTier | None = None
    ) -> ResolvedPolicy:
        """Merge defaults, tier, service and agent sections for this service and agent."""
        doc: Any = self.document
        service_section = doc.services.get(service)
        scoped = [doc.defaults, service_section, doc.agents.get(agent)]
        if service_section is not None:
            scoped.append(service_section.agents.get(agent))
        scoped = [s for s in scoped if s is not None]
        tier = risk_tier or next(
            (s.risk_tier for s in reversed(scoped) if s.risk_tier), DEFAULT_RISK_TIER
        )
        tier_sections = [doc.tiers[tier]] if tier in doc.tiers else []
        sections = [scoped[0], *tier_sections, *scoped[1:]]
        return _merge(sections, tier, self.prices)


# Section fields that select detectors rather than carry settings merged field by field.
SELECTION_FIELDS = frozenset(
    {"risk_tier", "enable", "disable", "required", "severity", "agents", "scorers", "requests"}
)


def _merge(sections: list[Any], tier: RiskTier, prices: PriceTable) -> ResolvedPolicy:
    enabled = set(REGISTRY)
    required = set(TIER_REQUIRED[tier])
    severities: dict[str, Severity] = {}
    merged: dict[str, dict[str, Any]] = {}
    scorers: tuple[str, ...] | None = None
    requests: dict[str, tuple[str, ...]] = {}
    for section in sections:
        if section.scorers is not None:
            scorers = tuple(section.scorers)
        requests.update(section.requests or {})
        enabled = (enabled - set(section.disable)) | set(section.enable)
        required |= set(section.required)
        severities.update(section.severity)
        for name in section.model_fields_set - SELECTION_FIELDS:
            value = getattr(section, name)
            if value is not None:
                merged.setdefault(name, {}).update(value.model_dump(exclude_unset=True))
    conventions = Conventions(
        tools=ToolEffects(**merged.pop("tools", {})),
        identity=IdentityConfig(**merged.pop("identity", {})),
        idempotency=IdempotencyConfig(**merged.pop("idempotency", {})),
        requests=requests,
    )
    params = {
        code: rule.params(**merged.get(rule.policy_key, {}))
        for code, rule in sorted(REGISTRY.items())
        if code in enabled
    }
    return ResolvedPolicy(
        tier, conventions, params, frozenset(required), severities, prices, scorers
    )


def default_policy() -> Policy:
    """The policy used with no file: every detector on, conventions read from span hints."""
    return Policy(policy_document_model()(), shipped_price_table())


def load_policy(path: str | Path | None = None) -> Policy:
    """Read and validate a YAML policy file; PolicyError names line and field of each error."""
    if path is None:
        return default_policy()
    path = Path(path)
    text = path.read_text()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PolicyError(f"{path.name}: invalid YAML: {error}") from error
    lines = _line_map(node) if node is not None else {}
    try:
        context = {POLICY_DIR_CONTEXT: path.parent}
        document = policy_document_model().model_validate(data or {}, context=context)
    except ValidationError as error:
        raise PolicyError(_describe(error, lines, path.name)) from None
    table_path: Any = getattr(document, "price_table", None)
    prices = load_price_table(path.parent / table_path) if table_path else shipped_price_table()
    return Policy(document, prices)


def _line_map(node: yaml.Node, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """1-based line of every mapping key / sequence item, by its path of strings."""
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            child = (*path, str(key_node.value))
            lines.update(_line_map(value_node, child))
            lines[child] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.update(_line_map(item, (*path, str(index))))
    return lines


def _describe(error: ValidationError, lines: dict[tuple[str, ...], int], filename: str) -> str:
    """One `file:line: dotted.field: message` per pydantic error."""
    out = []
    for item in error.errors():
        loc = tuple(str(part) for part in item["loc"])
        known = next(loc[:n] for n in range(len(loc), -1, -1) if loc[:n] in lines or n == 0)
        line = lines.get(known, 1)
        out.append(f"{filename}:{line}: {'.'.join(loc) or '<root>'}: {item['msg']}")
    return "\n".join(out)
