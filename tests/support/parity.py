"""One parity harness for the fast paths and their slow twins (`schemas.decline`).

Same inputs through both implementations; every answer the fast one decides is compared
with the slow one's field by field (dataclasses, pydantic models, protobuf messages, dicts
and sequences walked down to their leaves, floats by their bits, types kept), naming the
first fields that differ; every decline is counted by its reason. `assert_holds` fails on
any difference, and when the fast path decided fewer items than asked: a fast path that
is gone (not built, or declining everything) fails its parity test, and so does a slow
twin that is gone (the harness calls it for every decided item).
"""

from __future__ import annotations

import dataclasses
import struct
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message
from pathgrade.schemas.decline import Declined, declined
from pydantic import BaseModel

I = TypeVar("I")  # noqa: E741
O = TypeVar("O")  # noqa: E741

MAX_NAMED = 8
"""How many differing fields an assertion names."""


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    """`value`'s leaves by path (`spans[0].attributes['k']`): each a comparable
    (type name, value), floats by their bits (NaN equals itself, -0.0 is not 0.0)."""
    out: dict[str, Any] = {}
    _walk(value, path, out)
    return out


def _walk(value: Any, path: str, out: dict[str, Any]) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out[path + "<type>"] = type(value).__name__
        for field in dataclasses.fields(value):
            _walk(getattr(value, field.name), f"{path}.{field.name}", out)
    elif isinstance(value, BaseModel):
        out[path + "<type>"] = type(value).__name__
        for name in type(value).model_fields:
            _walk(getattr(value, name), f"{path}.{name}", out)
    elif isinstance(value, Message):
        out[path + "<type>"] = type(value).__name__
        for field, item in value.ListFields():
            _walk(item, f"{path}.{field.name}", out)
    elif isinstance(value, dict):
        out[path + "<keys>"] = ("keys", tuple(map(repr, value)))  # order kept
        for key, item in value.items():
            _walk(item, f"{path}[{key!r}]", out)
    elif isinstance(value, list | tuple) or _repeated(value):
        out[path + "<len>"] = (type(value).__name__, len(value))
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", out)
    elif isinstance(value, float):
        out[path] = ("float", struct.pack("<d", value))
    else:
        out[path] = (type(value).__name__, value)


def _repeated(value: Any) -> bool:
    """A protobuf repeated field (a sequence that is no list)."""
    return (
        hasattr(value, "__len__")
        and hasattr(value, "__getitem__")
        and not isinstance(value, str | bytes | bytearray | memoryview)
    )


def differences(fast: Any, slow: Any) -> list[str]:
    """The fields (paths) whose leaves differ between `fast` and `slow`, with both values."""
    a, b = leaves(fast), leaves(slow)
    return [f"{path}: fast {a.get(path, '<absent>')!r} != slow {b.get(path, '<absent>')!r}"
            for path in sorted(a.keys() | b.keys()) if a.get(path) != b.get(path)]  # fmt: skip


@dataclasses.dataclass
class Parity(Generic[I, O]):
    """The parity of one pair: items decided and compared, declines by reason, and the
    differences found (`label: field: fast != slow`)."""

    pair: str
    decided: int = 0
    declined: Counter[str] = dataclasses.field(default_factory=Counter)
    found: list[str] = dataclasses.field(default_factory=list)

    def note(self, answers: Iterable[Any]) -> None:
        """Count the fast path's per-item answers (for a path that answers many items in
        one call and whose outputs are compared whole, `compare`)."""
        for answer in answers:
            if declined(answer):
                self.declined[answer.reason] += 1
            else:
                self.decided += 1

    def compare(self, label: str, fast: Any, slow: Any) -> None:
        """Compare one output of each side field by field."""
        self.found += [f"{label}: {line}" for line in differences(fast, slow)]

    def check(
        self, inputs: Iterable[I], fast: Callable[[I], O | Declined], slow: Callable[[I], O],
        label: Callable[[I], str] = repr,
    ) -> None:  # fmt: skip
        """Each input through `fast`; each it decides compared with `slow`'s answer, each
        it declines counted."""
        for item in inputs:
            answer = fast(item)
            self.note([answer])
            if not declined(answer):
                self.compare(label(item)[:80], answer, slow(item))

    def assert_holds(self, min_decided: int = 1) -> None:
        """No difference, and at least `min_decided` items decided by the fast path."""
        counts = dict(self.declined.most_common())
        assert not self.found, (
            f"{self.pair}: {len(self.found)} fields differ (decided {self.decided}, declined "
            f"{counts}):\n" + "\n".join(self.found[:MAX_NAMED])
        )
        assert self.decided >= min_decided, (
            f"{self.pair}: the fast path decided {self.decided} items (< {min_decided}); "
            f"declined {counts}"
        )
