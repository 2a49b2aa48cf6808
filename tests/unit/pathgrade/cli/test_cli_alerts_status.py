"""`pathgrade realtime`'s status line says when traces were skipped, and only then."""

from __future__ import annotations

from typing import Any

from pathgrade.cli.alerts import _status


class Counters:
    def __init__(self, failures: int, turns: tuple[int, int] = (0, 0)) -> None:
        self.failures = failures
        self.turns = turns

    def counters(self) -> dict[str, Any]:
        return {
            "spans": 10, "traces_held": 1, "spans_held": 2, "traces_evaluated": 3, "alerts": 4,
            "evaluation_failures": self.failures, "turns_shared": self.turns[0],
            "turns_received": self.turns[1],
        }  # fmt: skip


def test_status_names_skipped_traces_only_when_there_are_some() -> None:
    assert _status(Counters(0)) == (
        "10 spans read, 1 traces / 2 spans buffered, 3 evaluated, 4 alerts"
    )
    assert _status(Counters(2)).endswith(", 2 traces skipped (evaluation failed; see the log)")


def test_status_counts_shared_conversation_turns_when_there_are_some() -> None:
    assert "turns" not in _status(Counters(0))
    assert _status(Counters(0, (5, 7))).endswith(
        ", conversation turns 5 shared / 7 from other consumers"
    )
