"""A bounded memory for work the hot path repeats on repeated input (scrubbed texts, lexicon
hits, fingerprints, facts, key verdicts, flattened key paths), and attributes computed once
per object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(dict[K, V]):
    """A dict that forgets everything once it holds `limit` entries: hostile input cannot
    grow it without bound, and the hot entries come back at once."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: K, value: V) -> V:
        """Remember `value` under `key` and return it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value


class cached_attribute(Generic[V]):
    """`functools.cached_property` without its lock, for objects one thread reads (Python
    3.11's takes an RLock on every first read: about four times this first read's cost).
    Computed on the first read, then an ordinary attribute of the instance."""

    def __init__(self, compute: Callable[[Any], V]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> V:
        if instance is None:
            return self  # type: ignore[return-value]  # read on the class: the descriptor
        value = instance.__dict__[self.name] = self.compute(instance)
        return value
