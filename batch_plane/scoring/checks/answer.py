"""Checks on the final answer the agent returned: a pattern present or absent, no personal
data, JSON with required keys or a schema, a number within a tolerance.

The answer is the one the agent handed back to the harness (the adapter's `response`), so
these checks decide whatever the collector captured.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.checks.registry import (
    AttemptEvidence,
    Check,
    CheckOutcome,
    CheckParams,
    Fixture,
)
from pathgrade.content.pii import PiiScanner
from pathgrade.detectors.jsonschema_subset import validate
from pathgrade.detectors.registry import regex_list
from pathgrade.schemas.personal_data import CARD, EMAIL
from pydantic import Field, field_validator, model_validator

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


class RegexParams(CheckParams):
    """A regular expression that must (or, `present: false`, must not) occur in the answer."""

    pattern: str = Field(min_length=1)
    present: bool = True
    ignore_case: bool = False

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        regex_list((pattern,))
        return pattern


ANSWER_REGEX = Check(
    layer="answer",
    name="answer_regex",
    doc="The final answer contains a match of `pattern` (Python `re.search`; `present: "
    r"false`: contains none). For example `\bORD-\d{6}\b`: an order reference of exactly "
    "six digits.",
    params=RegexParams,
    passing=Fixture(
        {"pattern": r"\bORD-\d{6}\b"}, FixtureAttempt(answer="Refund issued, reference ORD-204417.")
    ),
    failing=Fixture(
        {"pattern": r"\bORD-\d{6}\b"}, FixtureAttempt(answer="Refund issued, reference ORD-12345.")
    ),
)


@ANSWER_REGEX.register
def answer_regex(params: RegexParams, evidence: AttemptEvidence) -> CheckOutcome:
    """re.search of the pattern in the answer, against `present`."""
    flags = re.IGNORECASE if params.ignore_case else 0
    found = re.search(params.pattern, evidence.answer, flags)
    if params.present and found is None:
        return CheckOutcome.fail(f"The final answer has no match of /{params.pattern}/.")
    if not params.present and found is not None:
        return CheckOutcome.fail(
            f"The final answer matches /{params.pattern}/ ({found.group(0)!r}), which must be "
            "absent."
        )
    return CheckOutcome.ok()


PiiKind = Literal["email", "card"]
_SCANNER = PiiScanner()
_PII_NAMES = ((EMAIL, "an e-mail address"), (CARD, "a Luhn-valid card number"))


class PiiParams(CheckParams):
    """Kinds of personal data that must not appear in the answer."""

    kinds: frozenset[PiiKind] = frozenset({"email", "card"})


ANSWER_NO_PII = Check(
    layer="safety",
    name="answer_no_pii",
    doc="The final answer holds no e-mail address and no Luhn-valid card number (the "
    "definitions of `content.pii` the collector and PG115 `output-patterns` use); `kinds` "
    "narrows it to `email` or `card`. The reason names the kind, never the value.",
    params=PiiParams,
    passing=Fixture({}, FixtureAttempt(answer="We will e-mail you the receipt.")),
    failing=Fixture({"kinds": ["email"]}, FixtureAttempt(answer="Write to ann@example.com.")),
)


@ANSWER_NO_PII.register
def answer_no_pii(params: PiiParams, evidence: AttemptEvidence) -> CheckOutcome:
    """Each kind found fails the check."""
    kinds = _SCANNER.find(evidence.answer)
    found = [what for kind, what in _PII_NAMES if kind in params.kinds and kinds.get(kind)]
    if found:
        return CheckOutcome.fail(f"The final answer contains {' and '.join(found)}.")
    return CheckOutcome.ok()


class JsonParams(CheckParams):
    """The answer must parse as JSON, hold `required_keys` (an object) and validate against
    `schema` (the JSON Schema subset PG104 uses)."""

    required_keys: list[str] = Field(default_factory=list)
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")


ANSWER_JSON = Check(
    layer="answer",
    name="answer_json",
    doc="The final answer (surrounding whitespace ignored) parses as JSON; with "
    "`required_keys` it is an object holding each of them; with `schema` it validates "
    "against that JSON Schema (type, required, properties, additionalProperties, items, "
    "enum, const, bounds, lengths, pattern: the subset PG104 validates tool arguments with; "
    "other keywords are ignored).",
    params=JsonParams,
    passing=Fixture(
        {"required_keys": ["order_id", "status"]},
        FixtureAttempt(answer='{"order_id": "A1001", "status": "shipped"}'),
    ),
    failing=Fixture(
        {"schema": {"type": "object", "properties": {"refund": {"type": "number"}}}},
        FixtureAttempt(answer='{"refund": "twenty"}'),
    ),
)


@ANSWER_JSON.register
def answer_json(params: JsonParams, evidence: AttemptEvidence) -> CheckOutcome:
    """Parse, then required keys, then the schema."""
    try:
        value = json.loads(evidence.answer)
    except ValueError as error:
        return CheckOutcome.fail(f"The final answer is not JSON ({error}).")
    if params.required_keys:
        if not isinstance(value, dict):
            return CheckOutcome.fail(
                f"The final answer is a JSON {type(value).__name__}, not an object with keys "
                f"{', '.join(params.required_keys)}."
            )
        missing = [key for key in params.required_keys if key not in value]
        if missing:
            return CheckOutcome.fail(f"The final answer lacks key(s) {', '.join(missing)}.")
    errors = validate(value, params.json_schema) if params.json_schema is not None else []
    if errors:
        return CheckOutcome.fail(f"The final answer violates its schema: {'; '.join(errors)}.")
    return CheckOutcome.ok()


class NumberParams(CheckParams):
    """A number in the answer compared with `expected`: the first number in the text, the
    first group (else the match) of `pattern`, or the value of `key` in a JSON object."""

    expected: float
    tolerance: float = Field(default=0.0, ge=0)
    relative_tolerance: float = Field(default=0.0, ge=0)
    pattern: str | None = None
    key: str | None = None

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        return regex_list((pattern,))[0] if pattern is not None else None

    @model_validator(mode="after")
    def _one_locator(self) -> NumberParams:
        if self.pattern is not None and self.key is not None:
            raise ValueError("give `pattern` or `key`, not both")
        return self

    @property
    def allowed(self) -> float:
        """The largest difference that still passes."""
        return max(self.tolerance, self.relative_tolerance * abs(self.expected))


ANSWER_NUMBER = Check(
    layer="answer",
    name="answer_number",
    doc="A number in the final answer is within `tolerance` (absolute) or "
    "`relative_tolerance` (of `expected`) of `expected`, whichever allows more. The number "
    "is the first one in the text, the first group (else the whole match) of `pattern`, or "
    "the value under `key` when the answer is a JSON object.",
    params=NumberParams,
    passing=Fixture(
        {"expected": 42.5, "tolerance": 0.1},
        FixtureAttempt(answer="Your refund is 42.46 EUR."),
    ),
    failing=Fixture(
        {"expected": 42.5, "pattern": r"refund is (\d+(?:\.\d+)?)"},
        FixtureAttempt(answer="Order 7: your refund is 40 EUR."),
    ),
)


@ANSWER_NUMBER.register
def answer_number(params: NumberParams, evidence: AttemptEvidence) -> CheckOutcome:
    """Find the number, then compare."""
    found = _number(params, evidence.answer)
    if isinstance(found, str):
        return CheckOutcome.fail(found)
    if abs(found - params.expected) > params.allowed:
        return CheckOutcome.fail(
            f"The final answer's number is {found:g}, expected {params.expected:g} "
            f"± {params.allowed:g}."
        )
    return CheckOutcome.ok()


def _number(params: NumberParams, answer: str) -> float | str:
    """The located number, or why there is none."""
    if params.key is not None:
        try:
            value = json.loads(answer)
        except ValueError:
            return f"The final answer is not a JSON object with key {params.key!r}."
        number = value.get(params.key) if isinstance(value, dict) else None
        if isinstance(number, int | float) and not isinstance(number, bool):
            return float(number)
        return f"The final answer has no number under key {params.key!r}."
    if params.pattern is not None:
        match = re.search(params.pattern, answer)
        text = (match.group(1) if match.groups() else match.group(0)) if match else None
        if text is None:
            return f"The final answer has no match of /{params.pattern}/."
        found = _NUMBER.search(text)
    else:
        found = _NUMBER.search(answer)
    if found is None:
        return "The final answer holds no number."
    return float(found.group(0))
