"""Progress of a long command (`eval`, `edge run`, `replay`, `dataset import`, judging,
scoring) on standard error.

On a terminal: a tqdm bar with counts, rate and time left, redrawn in place. Anywhere
else (a CI log, a pipe, a file): a plain line when the job starts, every `PLAIN_EVERY_S`
seconds, and when it ends, so a log shows that the job moves without a line per item.
A `Progress` is the `(done, total)` callback the batch plane's jobs take; callers may call
it from several threads.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from tqdm import tqdm


PLAIN_EVERY_S = 10.0


class Progress:
    """`label`'s progress in `unit`s on `stream` (default: standard error), as a bar on a
    terminal and as periodic plain lines elsewhere; use as a context manager (`close`
    ends the bar, or writes the last plain line, also when the job stops early)."""

    def __init__(
        self,
        label: str,
        unit: str = "item",
        stream: TextIO | None = None,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.unit = unit
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self._clock = clock
        self._terminal = _is_terminal(self.stream)
        self._lock = threading.Lock()
        self._bar: tqdm | None = None
        self._done = 0
        self._total = 0
        self._started: float | None = None
        self._written_at: float | None = None
        self._written_done = -1

    def __call__(self, done: int, total: int) -> None:
        """`done` of `total` units are finished (calls from threads may arrive out of
        order: the largest `done` counts)."""
        with self._lock:
            self._done = max(self._done, done)
            self._total = total
            if self._terminal:
                self._draw()
            else:
                self._write_due()

    def _draw(self) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self._total, desc=self.label, unit=self.unit, file=self.stream,
                dynamic_ncols=True, mininterval=0.2,
            )  # fmt: skip
        if self._bar.total != self._total:
            self._bar.total = self._total
        self._bar.update(self._done - self._bar.n)

    def _write_due(self) -> None:
        now = self._clock()
        if self._started is None:
            self._started = now
        due = self._written_at is None or now - self._written_at >= self.every_s
        if due or self._done >= self._total:
            self._write(now)

    def _write(self, now: float) -> None:
        if self._done == self._written_done:
            return
        assert self._started is not None
        self.stream.write(
            plain_line(self.label, self.unit, self._done, self._total, now - self._started) + "\n"
        )
        self.stream.flush()
        self._written_at, self._written_done = now, self._done

    def close(self) -> None:
        """End the bar, or write the last plain line if the latest count was not written."""
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self._started is not None:
                self._write(self._clock())

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def plain_line(label: str, unit: str, done: int, total: int, elapsed_s: float) -> str:
    """`label: done/total units (P%), R units/s, T elapsed, about T left`."""
    from tqdm import tqdm

    percent = f" ({100 * done / total:.0f}%)" if total else ""
    line = (
        f"{label}: {done:,}/{total:,} {unit}s{percent}, {tqdm.format_interval(elapsed_s)} elapsed"
    )
    if done and elapsed_s > 0:
        rate = done / elapsed_s
        line += f", {rate:,.1f} {unit}s/s"
        if done < total:
            line += f", about {tqdm.format_interval((total - done) / rate)} left"
    return line


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
