"""Decide or decline: the one contract of pathgrade's fast paths.

Four fast paths sit beside slow twins that give the same answers: the fact kernel
(`collector/_facts_kernel.c`) beside the Python redactor and fact maker, the OTLP reader
(`content/_otlp_reader.c`) beside upb, the store's SQL insert
(`batch_plane/store/otlp_insert.py`) beside `span_rows`, and the SQL mapping
(`batch_plane/store/genai_sql.py`) beside the Python one (`schemas/genai_mapping.py`). Each answers
per item with its result, or with a `Declined` naming why it does not decide that item;
the slow twin then decides it. A declined item costs time, never an answer: both twins'
answers are compared field by field on the same inputs, every decline counted by reason
(tests/support/parity.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Declined:
    """A fast path's answer for an item it leaves to its slow twin, and why (one of the
    path's own reasons, a short phrase; each is one shared instance, so a hot path
    returns it without making anything)."""

    reason: str

    def __repr__(self) -> str:
        return f"Declined({self.reason!r})"


DECLINES = "declines"
"""A process's counters' entry holding a fast path's declines by reason (reason -> items):
the store writer's SQL insert's (`StoreWriterStats.declines`)."""

Decision = T | Declined
"""What a fast path answers for one item: its result, or `Declined`."""


def declined(answer: object) -> bool:
    """Whether a fast path's `answer` is a decline (an exact class check: hot paths call
    this per item)."""
    return answer.__class__ is Declined
