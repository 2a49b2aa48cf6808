"""The evaluator's bounded memories keep exactly their limit, the least recently put
forgotten first."""

from __future__ import annotations

from pathgrade.realtime_plane.evaluate import _Lru


def test_a_bounded_memory_keeps_its_limit_and_forgets_the_oldest() -> None:
    memory = _Lru(2)
    memory.put("a", 1)
    memory.put("b", 2)
    assert list(memory) == ["a", "b"]  # at the limit: nothing forgotten
    memory.put("a", 3)  # put again: the most recent
    memory.put("c", 4)
    assert dict(memory) == {"a": 3, "c": 4}
