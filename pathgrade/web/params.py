"""Query-string values of the UI's pages: parsed, checked, and written back into links.

A bad value is a `BadParameter` naming the parameter and the reason; the page answers 400
with that message instead of a guess.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from urllib.parse import urlencode

_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_TEXT = 200  # longest free-text or identifier value accepted in a URL


class BadParameter(ValueError):
    """A query-string value that cannot be used: `name` and why."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name


def text(params: Mapping[str, str], name: str) -> str:
    """A free-text or identifier value ("" when absent), at most MAX_TEXT characters."""
    value = params.get(name, "").strip()
    if len(value) > MAX_TEXT:
        raise BadParameter(name, f"at most {MAX_TEXT} characters")
    return value


def number(params: Mapping[str, str], name: str) -> float | None:
    """A non-negative number, None when absent."""
    value = params.get(name, "").strip()
    if not value:
        return None
    try:
        parsed = float(value)
    except ValueError:
        raise BadParameter(name, f"expected a number, got {value!r}") from None
    if not parsed >= 0 or parsed == float("inf"):
        raise BadParameter(name, f"expected a non-negative number, got {value!r}")
    return parsed


def choice(params: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed`; the first when absent."""
    value = params.get(name, "").strip() or allowed[0]
    if value not in allowed:
        raise BadParameter(name, f"expected one of {', '.join(allowed)}, got {value!r}")
    return value


def yes_no(params: Mapping[str, str], name: str) -> bool | None:
    """`yes` -> True, `no` -> False, absent -> None."""
    value = choice(params, name, ("", "yes", "no"))
    return None if not value else value == "yes"


def instant_ns(params: Mapping[str, str], name: str, default: str, now_ns: int) -> int:
    """A point in time as Unix ns: a duration back from now (`15m`, `24h`, `7d`), `now`, or
    an ISO 8601 time (UTC unless it names a zone)."""
    value = params.get(name, "").strip() or default
    if value == "now":
        return now_ns
    match = _DURATION.match(value)
    if match:
        return now_ns - int(match[1]) * _UNIT_S[match[2]] * 1_000_000_000
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise BadParameter(
            name, f"expected a duration like 15m/24h/7d, 'now' or an ISO time, got {value!r}"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1e9)


def query_string(values: Mapping[str, object]) -> str:
    """`?a=1&b=x` of the values that are set (not None, "" or False); "" when none is."""
    kept = {k: v for k, v in values.items() if v not in (None, "", False)}
    return "?" + urlencode(kept) if kept else ""
