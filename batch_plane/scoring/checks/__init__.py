"""Per-case checks: what one dataset item asks of an attempt, beyond its expected path.

An item declares its checks in JSONL as `{"check": NAME, ...params}` objects (`CheckSpec`),
or in the harness vocabulary as `{"type": NAME, ...params}` (`harness`);
`CHECKS` is the one registry (name, params model, doc, passing and failing fixture,
function), and `run_checks` gives each declared check's outcome on one attempt. Importing
the package registers every family (`calls`, `answer`, `path`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pathgrade.batch_plane.scoring.checks import answer, calls, path  # noqa: F401  (register)
from pathgrade.batch_plane.scoring.checks.field_errors import error_reasons
from pathgrade.batch_plane.scoring.checks.harness import Declaration, read_declaration
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
    """One check an item declares, written flat: `{"check": "answer_regex", "pattern": ...}`,
    or in the harness vocabulary (`{"type": "regex", "pattern": ...}`, `harness`), which
    reads as the catalogue's check.

    The params are validated by the check's own model (unknown keys are errors, named
    with the nearest known key); a bad declaration is one error naming the check and each
    bad field.
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
            raise ValueError(
                'a check is an object {"check": NAME, ...params} (or {"type": NAME, ...} in '
                "the harness vocabulary)"
            )
        declared = read_declaration(value)
        model = CHECKS[declared.check].params
        try:
            params = model.model_validate(declared.params)
        except ValidationError as error:
            errors = error.errors()
            reasons = error_reasons(errors, declared.known_keys(model))
            problems = "; ".join(
                f"{'.'.join(_written(declared, e['loc'])) or '(params)'}: {reason}"
                for e, reason in zip(errors, reasons, strict=True)
            )
            raise ValueError(f"check {declared.label}: {problems}") from None
        return {"check": declared.check, "params": params}

    @model_serializer
    def _flat(self) -> dict[str, Any]:
        given = self.params.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return {"check": self.check, **given}


def _written(declared: Declaration, loc: tuple[int | str, ...]) -> list[str]:
    """An error location with its first key as the item wrote it."""
    parts = [str(part) for part in loc]
    return [declared.written_key(parts[0]), *parts[1:]] if parts else []


def run_checks(specs: Sequence[CheckSpec], evidence: AttemptEvidence) -> dict[str, CheckOutcome]:
    """Per check name the item declares, the outcome of all its declarations on one
    attempt (each must pass: `all_of`)."""
    outcomes: dict[str, list[CheckOutcome]] = {}
    for spec in specs:
        outcomes.setdefault(spec.check, []).append(CHECKS[spec.check].run(spec.params, evidence))
    return {name: all_of(found) for name, found in outcomes.items()}
