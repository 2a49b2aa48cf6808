"""The detector catalogue (docs/detectors.md), rendered from the registry: every rule's
doc sections, reads, stability and described params, in the fixed prose of
`detectors/data/catalogue.md`.

`python -m pathgrade.cli.reference --write` writes it (with the configuration tables).
"""

from __future__ import annotations

from importlib import resources
from string import Template
from typing import Any

from pathgrade.detectors import REGISTRY, data
from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.policy import RISK_TIERS, TIER_REQUIRED, SectionBase
from pathgrade.detectors.registry import Params, Rule
from pydantic import BaseModel

LONG_DEFAULT = 60
"""A default whose text is longer than this is shown as `(see source)`."""


def render() -> str:
    """The whole catalogue as Markdown."""
    rules = [REGISTRY[code] for code in sorted(REGISTRY)]
    template = Template((resources.files(data) / "catalogue.md").read_text(encoding="utf-8"))
    return template.substitute(
        tiers=_tiers(),
        conventions=_conventions(),
        section_keys=_params(SectionBase),
        table=_table(rules),
        rules="\n\n".join(_rule(rule) for rule in rules),
    )


def _conventions() -> str:
    """The policy's shared keys (`Conventions`), each with its fields and defaults."""
    lines = []
    for name, info in Conventions.model_fields.items():
        lines.append(f"- `{name}`: {info.description}")
        fields = info.annotation
        if isinstance(fields, type) and issubclass(fields, BaseModel):
            lines += [f"  {line}" for line in _params(fields).splitlines()]
    return "\n".join(lines)


def _tiers() -> str:
    return "; ".join(
        f"{tier}: {', '.join(sorted(TIER_REQUIRED[tier])) or 'none'}" for tier in RISK_TIERS
    )


def _table(rules: list[Rule]) -> str:
    rows = [
        f"| {r.code} | `{r.name}` | {r.severity} | {r.layer} | {r.stability} | `{r.policy_key}` |"
        for r in rules
    ]
    head = "| code | name | severity | layer | stability | policy key |\n|---|---|---|---|---|---|"
    return "\n".join([head, *rows])


def _rule(rule: Rule) -> str:
    doc = rule.doc
    sections = [
        f"## {rule.code} `{rule.name}` ({rule.severity})",
        f"**Finds:** {doc.finds}",
        f"**Why it matters:** {doc.why}",
        f"**Cannot decide:** {doc.undecided}",
        f"**Fires:** {doc.fires}",
        f"**Does not fire:** {doc.quiet}",
        f"**Reads:** {rule.reads}.",
        f"**Capture off (the default):** {doc.capture_off}",
        f"**Capture on:** {doc.capture_on}",
        f"**Layer:** {rule.layer} (the layer of the agent it grades, as an offline metric "
        "and in the gate's report).",
        f"**Stability:** {rule.stability}.",
        f"**Params** (`{rule.policy_key}`):\n\n" + _params(rule.params),
    ]
    if doc.notes:
        sections.append(doc.notes)
    return "\n\n".join(sections)


def _params(model: type[BaseModel]) -> str:
    lines = []
    for name, info in model.model_fields.items():
        default = (
            "required"
            if info.is_required()
            else f"default `{_default(info.get_default(call_default_factory=True))}`"
        )
        lines.append(f"- `{name}` ({default}): {info.description}")
        nested = _nested_model(info.annotation)
        if nested is not None:
            lines += [f"  {line}" for line in _params(nested).splitlines()]
    return "\n".join(lines)


def _nested_model(annotation: Any) -> type[Params] | None:
    """The params model inside a container annotation (`dict[str, dict[str, ArgumentRule]]`);
    other models (a schema's `AgentGraph`) are documented where they are defined."""
    stack = list(getattr(annotation, "__args__", ()))
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, Params):
            return item
        stack += getattr(item, "__args__", ())
    return None


def _default(value: Any) -> str:
    if isinstance(value, frozenset):
        value = sorted(value)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, BaseModel):
        return "(see source)"
    text = str(value)
    return "(see source)" if len(text) > LONG_DEFAULT else text
