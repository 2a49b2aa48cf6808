"""The broker lease: replays share it, a broker swap needs it alone."""

from __future__ import annotations

from pathlib import Path

from pathgrade.stack.ownership import broker_lease


def test_a_swap_cannot_take_the_lease_while_a_replay_holds_it(tmp_path: Path) -> None:
    with broker_lease(tmp_path, exclusive=False) as first, broker_lease(tmp_path, False) as second:
        assert first and second  # replays share it
        with broker_lease(tmp_path, exclusive=True, wait=False) as swap:
            assert not swap
    with broker_lease(tmp_path, exclusive=True, wait=False) as swap:
        assert swap
        with broker_lease(tmp_path, exclusive=False, wait=False) as replay:
            assert not replay  # a replay waits for the swap (here: does not wait)
