"""Validation messages that say what to write instead: an unknown key or name is reported
with the nearest known one (`max_tokns: unknown key (did you mean 'max_tokens'?)`), or
with the known ones when none is near."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from pydantic_core import ErrorDetails

NEAR = 0.6
"""How alike (difflib's ratio) a misspelt name and a known one must be to be suggested."""


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to `name`, None when none is near."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=NEAR)
    return close[0] if close else None


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """` (did you mean 'x'?)` with the nearest known name, else ` (known: a, b, ...)`."""
    close = nearest(name, known)
    if close is not None:
        return f" (did you mean {close!r}?)"
    return f" (known: {', '.join(sorted(known))})"


def error_reasons(errors: Sequence[ErrorDetails], known: Sequence[str]) -> list[str]:
    """Each pydantic error's reason, in order: a key the model does not have, at its top
    level, as `unknown key` with the nearest of the `known` keys; a missing top-level key
    with the unknown keys found instead; a validator's own message as it reads; else
    pydantic's."""
    unknown = [
        str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden" and len(e["loc"]) == 1
    ]
    found = f"; found {', '.join(map(repr, unknown))} instead" if unknown else ""
    reasons = []
    for error in errors:
        top_level = len(error["loc"]) == 1
        if error["type"] == "extra_forbidden" and top_level:
            reasons.append("unknown key" + did_you_mean(str(error["loc"][0]), known))
        elif error["type"] == "missing" and top_level:
            reasons.append(error["msg"] + found)
        else:
            reasons.append(error["msg"].removeprefix("Value error, "))
    return reasons
