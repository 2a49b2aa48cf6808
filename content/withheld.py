"""The mark a withheld value travels as: what the collector forwards instead of a value it
may not forward as text (an attribute whose key is not allowed, an attribute key that
does not look like one, a span's status message).

A withheld value is `[WITHHELD:<type>:<fingerprint>]`, or `[WITHHELD:<type>:<fingerprint>:
<kinds>]` when the collector found personal data in it (`<kinds>`: `schemas.personal_data` kinds,
sorted, joined by `+`). `<type>` is the value's OTLP type (`string`, `int`, `double`,
`bytes`, `array`, `kvlist`) or `key` for an attribute key; `<fingerprint>` is the keyed
fingerprint of the value (`content.fingerprints`: equal values of one tenant have equal
marks, so equality, grouping and counting still work, and nothing of the value is in it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, NamedTuple

from pathgrade.content.fingerprints import is_fingerprint

WITHHELD_PREFIX: Final = "[WITHHELD:"
WITHHELD_SUFFIX: Final = "]"
KEY_TYPE: Final = "key"
"""The type of a withheld attribute key."""
_MARK = re.compile(r"\[WITHHELD:([a-z]+):([0-9a-f]{8}:[0-9a-f]{32})(?::([a-z+]+))?\]")


class Withheld(NamedTuple):
    """A withheld value's mark, read back."""

    type: str
    fingerprint: str
    kinds: tuple[str, ...]


def withheld_mark(value_type: str, fingerprint: str, kinds: Iterable[str] = ()) -> str:
    """The mark of a withheld value of `value_type` with `fingerprint`, and the kinds of
    personal data found in it."""
    found = "+".join(sorted(kinds))
    tail = ":" + found if found else ""
    return f"{WITHHELD_PREFIX}{value_type}:{fingerprint}{tail}{WITHHELD_SUFFIX}"


def read_withheld(text: object) -> Withheld | None:
    """The mark in `text` when it is one whole mark, else None."""
    if not isinstance(text, str) or not text.startswith(WITHHELD_PREFIX):
        return None
    match = _MARK.fullmatch(text)
    if match is None or not is_fingerprint(match.group(2)):
        return None
    kinds = tuple(match.group(3).split("+")) if match.group(3) else ()
    return Withheld(match.group(1), match.group(2), kinds)
