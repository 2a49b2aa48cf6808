"""Total number parsing for telemetry from the field: every reader of attribute values,
message keys and headers converts text to numbers here, and nothing here raises.

`str.isdigit()` is no guard for `int()`: it accepts superscripts ("²") and other digits
`int()` refuses, and `int()` refuses digit strings longer than Python's conversion limit
(4,300 digits). Only ASCII text is read as a number, so "١٢" (Arabic-Indic digits, which
`int()` and `float()` would accept) is text, not 12, wherever pathgrade reads it.
"""

from __future__ import annotations

import math
from typing import Any


def parse_int(text: str) -> int | None:
    """The integer an ASCII decimal text spells (optional sign, surrounding blanks), else
    None."""
    if not text.isascii():
        return None
    try:
        return int(text)
    except ValueError:
        return None


def parse_index(text: str) -> int | None:
    """A list index: ASCII decimal digits only ("0", "12"), else None."""
    return parse_int(text) if text.isascii() and text.isdigit() else None


def integral(value: Any) -> int | None:
    """An int from an int, an integral float or a numeric ASCII text ("12", "12.0",
    "1e3"); None for anything else (booleans, fractions, infinities, other text)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        number = parse_int(value)
        if number is not None or not value.isascii():
            return number
        try:
            return integral(float(value))
        except ValueError:
            return None
    return None
