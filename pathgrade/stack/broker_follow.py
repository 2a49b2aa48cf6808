"""Following the bundled broker of a running `pathgrade up` across its swaps: each swap
starts a fresh broker on a new port and names it in `stack.json`, so a box reading that
broker (`pathgrade scorer --data-dir`) reconnects there instead of waiting on a stopped
one."""

from __future__ import annotations

import threading
from pathlib import Path

from pathgrade.stack.ownership import read_state

CHECK_EVERY_S = 1.0
"""How often `stack.json` is read for a moved broker."""
MOVE_WAIT_S = 10.0
"""How long a reader whose broker went away waits for `stack.json` to name the fresh one."""


def stack_broker(data_dir: Path | None) -> str | None:
    """The Kafka address of the stack running on `data_dir` (its bundled broker, or the
    `--kafka` it was started with), or None when none runs there."""
    state = read_state(data_dir.resolve()) if data_dir is not None else None
    return str(state["kafka"]) if state and state.get("kafka") else None


class BrokerWatch:
    """`stop` is set when `signalled` is, or when the stack on `data_dir` names another
    broker than `bootstrap` (then `moved_to` is that one's address)."""

    def __init__(self, data_dir: Path, bootstrap: str, signalled: threading.Event) -> None:
        self.stop = threading.Event()
        self.moved_to: str | None = None
        self._thread = threading.Thread(
            target=self._watch, args=(data_dir, bootstrap, signalled), daemon=True
        )
        self._thread.start()

    def _watch(self, data_dir: Path, bootstrap: str, signalled: threading.Event) -> None:
        while not signalled.wait(CHECK_EVERY_S):
            now = stack_broker(data_dir)
            if now is not None and now != bootstrap:
                self.moved_to = now
                break
        self.stop.set()


def moved_away(watch: BrokerWatch | None) -> bool:
    """Whether the followed broker moved (waiting up to MOVE_WAIT_S for `stack.json` to say
    so): an error of the old broker's client is then the swap's, not a failure."""
    return watch is not None and watch.stop.wait(MOVE_WAIT_S) and watch.moved_to is not None
