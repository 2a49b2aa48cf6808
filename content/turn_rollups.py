"""What an agent turn brings to a row of `monitor_rollups` (`schemas.rollups`): the slices
it holds, when it ended and the example that names it. The realtime plane counts turns with
them, the online scorer its scores."""

from __future__ import annotations

from typing import Any

from pathgrade.schemas.model import Trace
from pathgrade.schemas.rollups import slice_key


def turn_slices(turn: Trace, names: list[str]) -> list[str]:
    """`""` (all turns) and one `name=value` per slice of `names` the turn holds: on its top
    span, else the nearest span enclosing that turn only (where a turn says what it is)."""
    values: dict[str, Any] = {}
    for span in turn.own_spans():
        for name in names:
            if name not in values and _plain(span.attributes.get(name)):
                values[name] = span.attributes[name]
    return ["", *(slice_key(name, values[name]) for name in names if name in values)]


def turn_end_ns(turn: Trace) -> int:
    """When the turn ended: its top span's end (its start when the end is unknown)."""
    head = turn.root or turn.spans[0]
    return head.end_ns or head.start_ns


def turn_example(turn: Trace) -> str:
    """The turn as an example of a count: `trace id/top span id`."""
    return f"{turn.trace_id}/{(turn.root or turn.spans[0]).span_id}"


def _plain(value: object) -> bool:
    """A value a slice can hold: text or a number (a withheld value's mark is text: its
    turns group by its fingerprint)."""
    return isinstance(value, str | int | float) and not isinstance(value, bool) and value != ""
