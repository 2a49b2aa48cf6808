"""uvicorn's server with a housekeeping loop that sleeps: every HTTP server of the stack (the
collector's OTLP/HTTP receiver, the store owner's loopback endpoint and UI, the realtime
process's metrics) runs on it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import uvicorn

TICK_S = 1.0
"""How often an idle server wakes (uvicorn's own loop: ten times a second), to refresh its
Date header and see whether it should stop; `stop()` and a signal wake it at once."""


class QuietServer(uvicorn.Server):
    """uvicorn.Server whose `main_loop` wakes every TICK_S, or at once on `stop()` or a
    signal, instead of every 0.1 s: an idle stack's four servers woke 40 times a second for
    nothing (connections' own timers, keep-alive and shutdown, are the event loop's)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        while not await self.on_tick(0):  # 0: uvicorn refreshes the Date header each tick
            try:
                async with asyncio.timeout(TICK_S):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def stop(self) -> None:
        """Stop serving, from any thread (requests being processed finish)."""
        self.should_exit = True
        self._wake_up()

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self._wake_up()

    def _wake_up(self) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nothing left to wake
                loop.call_soon_threadsafe(wake.set)
