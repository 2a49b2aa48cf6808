"""`insert_halving`: rows the store cannot encode are found and left out, and a batch the
store's memory limit refuses is inserted in halves that fit; nothing else is retried."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pathgrade.batch_plane.store.client import QueryError, RowsRejected, insert_halving

OVER_LIMIT = "Code: 241. DB::Exception: memory limit exceeded (MEMORY_LIMIT_EXCEEDED)"


def _store(
    cap: int, bad: frozenset[int] = frozenset()
) -> tuple[list[list[Any]], Callable[[list[list[Any]]], None]]:
    """An insert that refuses more than `cap` rows (its memory limit) and any batch with a
    row in `bad` (not encodable); the rows it took."""
    stored: list[list[Any]] = []

    def insert(rows: list[list[Any]]) -> None:
        if len(rows) > cap:
            raise QueryError(OVER_LIMIT)
        if any(row[0] in bad for row in rows):
            raise RowsRejected("value out of range")
        stored.extend(rows)

    return stored, insert


def test_a_batch_over_the_memory_limit_goes_in_halves_that_fit() -> None:
    rows = [[n] for n in range(10)]
    stored, insert = _store(cap=3, bad=frozenset({4}))
    rejected = insert_halving(insert, rows)
    assert [row for row, _ in rejected] == [[4]]
    assert stored == [row for row in rows if row != [4]]


def test_one_row_over_the_memory_limit_or_another_error_propagates() -> None:
    _, insert = _store(cap=0)
    with pytest.raises(QueryError, match="MEMORY_LIMIT_EXCEEDED"):
        insert_halving(insert, [[1], [2]])

    def unavailable(rows: list[list[Any]]) -> None:
        raise QueryError("connection refused")

    with pytest.raises(QueryError, match="connection refused"):
        insert_halving(unavailable, [[1], [2]])
