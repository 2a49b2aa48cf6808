"""The harness vocabulary: per-case checks written the way the deterministic-evaluator
harness this project grew from writes them, `{"type": "called", "tool": "lookup_order"}`,
read as the catalogue's checks (`{"check": "tool_called", "tool": "lookup_order"}`).

Each harness type is an alias of one catalogue check (`HARNESS_TYPES`); the keys the
harness names otherwise are renamed (`arg`'s `key` and `expected` are `argument` and
`value`; `budget`'s `steps` and `cost_usd` are `max_steps` and `max_cost_usd`), every other
key is the catalogue check's own. A declaration read this way is the catalogue's check:
it scores, stores and exports under the catalogue's name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pathgrade.batch_plane.scoring.checks.field_errors import did_you_mean, nearest
from pathgrade.batch_plane.scoring.checks.registry import CHECKS
from pydantic import BaseModel

CHECK_KEY, TYPE_KEY = "check", "type"


@dataclass(frozen=True, slots=True)
class HarnessType:
    """A harness check type: the catalogue check it is, and the keys it names otherwise
    (harness key -> catalogue key)."""

    name: str
    check: str
    renamed: Mapping[str, str] = field(default_factory=dict)

    def harness_key(self, key: str) -> str:
        """The harness's name of a catalogue key."""
        return next((mine for mine, theirs in self.renamed.items() if theirs == key), key)

    def catalogue_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The params with the catalogue's key names; a catalogue name of a renamed key
        is refused (it is written the harness's way under `type`)."""
        for mine, theirs in self.renamed.items():
            if theirs in params:
                raise ValueError(
                    f"check {self.name!r}: {theirs}: unknown key (did you mean {mine!r}? "
                    f'{theirs!r} is the name under "check": "{self.check}")'
                )
        return {self.renamed.get(key, key): value for key, value in params.items()}


HARNESS_TYPES: dict[str, HarnessType] = {
    alias.name: alias
    for alias in (
        HarnessType("called", "tool_called"),
        HarnessType("not_called", "tool_not_called"),
        HarnessType("arg", "argument_equals", {"key": "argument", "expected": "value"}),
        HarnessType("order", "ordering"),
        HarnessType("no_repeat", "no_repeated_call"),
        HarnessType("regex", "answer_regex"),
        HarnessType("budget", "budget", {"steps": "max_steps", "cost_usd": "max_cost_usd"}),
    )
}
"""Harness type -> the catalogue check it is (docs/datasets.md, "The harness vocabulary")."""


@dataclass(frozen=True, slots=True)
class Declaration:
    """A check declaration read in either vocabulary: the catalogue check, its params
    under the catalogue's key names, and how the item wrote it (for messages)."""

    check: str
    params: dict[str, Any]
    harness: HarnessType | None = None

    @property
    def label(self) -> str:
        """The check as messages name it: `'budget'`, or `'arg' (argument_equals)`."""
        if self.harness is None:
            return repr(self.check)
        return f"{self.harness.name!r} ({self.check})"

    def written_key(self, key: str) -> str:
        """A catalogue key as the item wrote it."""
        return self.harness.harness_key(key) if self.harness is not None else key

    def known_keys(self, model: type[BaseModel]) -> list[str]:
        """The keys the params may have, as the item's vocabulary names them."""
        keys = [info.alias or name for name, info in model.model_fields.items()]
        return [self.written_key(key) for key in keys]


def read_declaration(value: Mapping[str, Any]) -> Declaration:
    """The declaration `{"check": NAME, ...}` or `{"type": HARNESS_TYPE, ...}` names; a
    ValueError naming the key expected, the key found and the nearest known name when it
    names neither."""
    has_check, has_type = CHECK_KEY in value, TYPE_KEY in value
    if has_check and has_type:
        raise ValueError(
            'give "check" (a catalogue name) or "type" (a harness type), not both '
            f'(found "check": {_json(value[CHECK_KEY])} and "type": {_json(value[TYPE_KEY])})'
        )
    params = {key: item for key, item in value.items() if key not in (CHECK_KEY, TYPE_KEY)}
    if has_type:
        alias = _harness_type(value[TYPE_KEY])
        return Declaration(alias.check, alias.catalogue_params(params), alias)
    if has_check:
        return Declaration(_catalogue_name(value[CHECK_KEY]), params)
    raise ValueError(f'no "check" key ({_found(value)})')


def _catalogue_name(name: Any) -> str:
    if isinstance(name, str) and name in CHECKS:
        return name
    if isinstance(name, str) and name in HARNESS_TYPES:
        raise ValueError(
            f'unknown check {name!r}: that is a harness type (write "type": {_json(name)}, or '
            f'"check": {_json(HARNESS_TYPES[name].check)})'
        )
    hint = did_you_mean(name, sorted(CHECKS)) if isinstance(name, str) else _known_checks()
    raise ValueError(f"unknown check {name!r}{hint}")


def _harness_type(name: Any) -> HarnessType:
    if isinstance(name, str) and name in HARNESS_TYPES:
        return HARNESS_TYPES[name]
    if isinstance(name, str) and name in CHECKS:
        raise ValueError(
            f"unknown harness type {name!r}: that is a catalogue name "
            f'(write "check": {_json(name)})'
        )
    hint = did_you_mean(name, list(HARNESS_TYPES)) if isinstance(name, str) else _known_types()
    raise ValueError(f"unknown harness type {name!r}{hint}")


def _found(value: Mapping[str, Any]) -> str:
    """What a declaration without "check" or "type" holds, and what was likely meant."""
    shown = ", ".join(
        f'"{key}": {_json(item)}' if isinstance(item, str) else f'"{key}"'
        for key, item in value.items()
    )
    found = f"found {shown}" if shown else "found an empty object"
    for item in value.values():
        if isinstance(item, str) and item in CHECKS:
            return f'{found}; did you mean "check": {_json(item)}?'
        if isinstance(item, str) and item in HARNESS_TYPES:
            return f'{found}; did you mean "type": {_json(item)}?'
    near = [(key, nearest(key, (CHECK_KEY, TYPE_KEY))) for key in value]
    guess = next(((key, close) for key, close in near if close), None)
    if guess is not None:
        return f'{found}; did you mean "{guess[1]}" for "{guess[0]}"?'
    return (
        f'{found}; write {{"check": NAME, ...}} with a catalogue name{_known_checks()} or '
        f'{{"type": NAME, ...}} with a harness type{_known_types()}'
    )


def _known_checks() -> str:
    return f" (known: {', '.join(sorted(CHECKS))})"


def _known_types() -> str:
    return f" (harness types: {', '.join(HARNESS_TYPES)})"


def _json(value: Any) -> str:
    """A value as JSON writes it (`"called"`), as the item would."""
    return json.dumps(value)
