"""How the UI's templates write numbers, times and values (Jinja2 filters)."""

from __future__ import annotations

import datetime
import json
from typing import Any

from pathgrade.content.withheld import read_withheld


def duration(ns: int | float | None) -> str:
    """`850 µs`, `12.3 ms`, `4.56 s`, `3 m 05 s`; "-" for None."""
    if ns is None:
        return "-"
    if ns == 0:
        return "0"
    if ns < 1_000_000:
        return f"{ns / 1000:,.0f} µs"
    if ns < 1_000_000_000:
        return f"{ns / 1e6:,.1f} ms"
    if ns < 60e9:
        return f"{ns / 1e9:,.2f} s"
    minutes, seconds = divmod(int(ns / 1e9), 60)
    return f"{minutes:,} m {seconds:02d} s"


def instant(ns: int | None) -> str:
    """`2026-07-01 12:00:01.234` (UTC) from Unix ns; "-" for None or 0."""
    if not ns:
        return "-"
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def iso_instant(text: str | None) -> str:
    """A stored ISO time (`2026-07-01T12:00:01.234567`) as `instant` writes it."""
    if not text:
        return "-"
    return text.replace("T", " ")[:23]


def usd(value: float | None) -> str:
    """`$0.0042`; "-" for None."""
    if value is None:
        return "-"
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def count(value: int | float | None) -> str:
    return "-" if value is None else f"{value:,}"


def score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4f}"


def pretty(value: Any) -> str:
    """A captured value as indented JSON (text as it is)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def short_id(value: str, length: int = 12) -> str:
    return value if len(value) <= length else value[:length] + "…"


def attribute(value: Any) -> Any:
    """An attribute key or value as the trace page shows it: a withheld one
    (`content.withheld`) says so, with its type, the start of its fingerprint and the kinds
    of personal data the collector found in it; anything else as it is."""
    mark = read_withheld(value)
    if mark is None:
        return value
    held = f"; held {' and '.join(mark.kinds)}" if mark.kinds else ""
    return f"withheld {mark.type} (fingerprint {short_id(mark.fingerprint, 17)}{held})"


FILTERS = {
    "attribute": attribute,
    "duration": duration,
    "instant": instant,
    "iso_instant": iso_instant,
    "usd": usd,
    "count": count,
    "score": score,
    "signed": signed,
    "pretty": pretty,
    "short_id": short_id,
}
