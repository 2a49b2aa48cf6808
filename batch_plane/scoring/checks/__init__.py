"""Per-case checks: what one dataset item asks of an attempt, beyond its expected path.

An item declares its checks in JSONL as `{"check": NAME, ...params}` objects (`CheckSpec`);
`CHECKS` is the one registry (name, params model, doc, passing and failing fixture,
function), and `run_checks` gives each declared check's outcome on one attempt. Importing
the package registers every family (`calls`, `answer`, `path`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pathgrade.batch_plane.scoring.checks import answer, calls, path  # noqa: F401  (register)
from pathgrade.batch_plane.scoring.checks.registry import (
    CHECKS,
    AttemptEvidence,
    Check,
    CheckOutcome,
    all_of,
)
from pydantic import BaseModel, ConfigDict, InstanceOf, ValidationError, model_serializer
from pydantic import model_validator as _model_validator

__all__ = [
    "CHECKS",
    "AttemptEvidence",
    "Check",
    "CheckOutcome",
    "CheckSpec",
    "all_of",
    "run_checks",
]


class CheckSpec(BaseModel):
    """One check an item declares, written flat: `{"check": "answer_regex", "pattern": ...}`.

    The params are validated by the check's own model (unknown keys are errors); a bad
    declaration is one error naming the check and each bad field.
    """

    model_config = ConfigDict(frozen=True)

    check: str
    params: InstanceOf[BaseModel]

    @_model_validator(mode="before")
    @classmethod
    def _from_flat(cls, value: Any) -> Any:
        if isinstance(value, CheckSpec):
            return value
        if not isinstance(value, dict):
            raise ValueError('a check is an object {"check": NAME, ...params}')
        name = value.get("check")
        if name not in CHECKS:
            raise ValueError(f"unknown check {name!r} (known: {', '.join(sorted(CHECKS))})")
        raw = {key: item for key, item in value.items() if key != "check"}
        try:
            params = CHECKS[name].params.model_validate(raw)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(params)'}: "
                f"{e['msg'].removeprefix('Value error, ')}"
                for e in error.errors()
            )
            raise ValueError(f"check {name!r}: {problems}") from None
        return {"check": name, "params": params}

    @model_serializer
    def _flat(self) -> dict[str, Any]:
        given = self.params.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return {"check": self.check, **given}


def run_checks(specs: Sequence[CheckSpec], evidence: AttemptEvidence) -> dict[str, CheckOutcome]:
    """Per check name the item declares, the outcome of all its declarations on one
    attempt (each must pass: `all_of`)."""
    outcomes: dict[str, list[CheckOutcome]] = {}
    for spec in specs:
        outcomes.setdefault(spec.check, []).append(CHECKS[spec.check].run(spec.params, evidence))
    return {name: all_of(found) for name, found in outcomes.items()}
