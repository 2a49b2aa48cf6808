"""The embedded stack's child processes: how one starts, reports, stops and dies.

A child (`ChildProcess`) runs a `main(*args, events, commands)` function in a spawned
interpreter: it reports events (`Ready` once it serves, `Failed` with its reason when it
fails) and takes commands, one dataclass each (`pathgrade.stack.messages`); every child
understands `Stop`. In the child, `child_process` arranges that

- it ends with its parent: a thread watches the parent's sentinel (a pipe that closes
  when the parent process ends, however it ended, SIGKILL included) and exits at once,
  so an orphan never keeps acknowledging on the stack's ports;
- signals are its own: it runs in a process group of its own with SIGINT ignored (from
  birth: the parent spawns it with SIGINT ignored), so Ctrl-C reaches only the parent,
  which stops the children in order; SIGTERM sent to the child itself ends it (the
  parent restarts it), so under systemd use `KillMode=mixed` (SIGTERM to the main
  process only);
- an exception anywhere in `main` is reported as a `Failed` event before it exits, and
  the parent notices a child that died without one (`start` polls its liveness), so a
  child that fails at start stops the stack at once with its reason.

Counters a child keeps in `SharedCounters` outlive it: the parent adds a restarted
child's counts to those of the processes it replaced.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pathgrade.stack.alert_lines import AlertLineSettings
from pathgrade.stack.alert_log import configure_alert_log
from pathgrade.stack.gc_schedule import schedule_full_collections
from pathgrade.stack.messages import Command, Event, Failed, Ready, Stop, Stopped

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

T = TypeVar("T")
E = TypeVar("E", bound=Event)
START_TIMEOUT_S = 60.0
_POLL_S = 0.2


class ChildFailed(RuntimeError):
    """A child process failed to start (its reason), or died before it was ready."""


class SharedCounters(Generic[T]):
    """The int fields of dataclass `counters_type`, kept in memory a child shares with
    its parent: the child counts into `counters()` as into the dataclass itself, the
    parent reads `totals()` at any time, after the child died too."""

    def __init__(self, context: Any, counters_type: type[T]) -> None:
        self.counters_type = counters_type
        self.names = [f.name for f in fields(counters_type) if f.type in (int, "int")]
        self.values = context.RawArray(ctypes.c_int64, len(self.names))

    def counters(self) -> T:
        """In the child: a `counters_type` instance whose int fields live in the shared
        memory (set to their defaults now)."""
        values = self.values

        def shared_field(index: int) -> property:
            return property(
                lambda _: values[index], lambda _, value: values.__setitem__(index, value)
            )

        shared_type = type(
            self.counters_type.__name__,
            (self.counters_type,),
            {name: shared_field(index) for index, name in enumerate(self.names)},
        )
        return shared_type()

    def totals(self) -> dict[str, int]:
        """In the parent: every shared field's value now."""
        return dict(zip(self.names, self.values, strict=True))


class ChildProcess:
    """One child process and its two queues, started from the parent."""

    def __init__(
        self,
        context: Any,
        name: str,
        target: Any,
        *args: Any,
        shared: list[SharedCounters[Any]] | None = None,
    ) -> None:
        self.name = name
        self.shared = shared or []
        self.events: Queue[Event] = context.Queue()
        self.commands: Queue[Command] = context.Queue()
        self.process = context.Process(
            target=target,
            args=(*args, *self.shared, self.events, self.commands),
            name=name,
        )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Ready:
        """Start and wait for `Ready`; returns it. ChildFailed with the child's
        reason when it reports an error, exits first, or is not ready in `timeout_s`
        (then it is killed)."""
        _spawn_ignoring_sigint(self.process)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                event: Event | None = self.events.get(timeout=_POLL_S)
                break
            except queue.Empty:
                pass
            if not self.process.is_alive():
                event = self._last_event()
                break
            if time.monotonic() >= deadline:
                self.process.kill()
                raise ChildFailed(f"the {self.name} process did not start in {timeout_s:.0f} s")
        if isinstance(event, Ready):
            return event
        if isinstance(event, Failed):
            raise ChildFailed(event.reason)
        raise ChildFailed(
            f"the {self.name} process exited with code {self.process.exitcode} before it "
            "was ready (its output above may say why)"
        )

    def _last_event(self) -> Event | None:
        """What a child that has just exited reported last (its error), if anything."""
        try:
            return self.events.get(timeout=1.0)
        except queue.Empty:
            return None

    def alive(self) -> bool:
        return self.process.is_alive()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def counted(self) -> dict[str, int]:
        """Its shared counters now (what it counted, also once it died)."""
        totals: dict[str, int] = {}
        for shared in self.shared:
            totals.update(shared.totals())
        return totals

    def send(self, command: Command) -> None:
        self.commands.put(command)

    def request(self, command: Command, reply: type[E], timeout_s: float = 120) -> E | None:
        """Send `command` and return its answer, the first event of type `reply` (None if
        the child died or did not answer in time)."""
        self.send(command)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=1)
            except queue.Empty:
                if not self.process.is_alive():
                    return None
                continue
            if isinstance(event, reply):
                return event
        return None

    def stop(self, command: Stop | None = None, timeout_s: float = 120) -> Stopped | None:
        """Send `command` (a plain `Stop` by default); returns the child's `Stopped` (None
        if it died without one). A child still running after that is killed."""
        if self.process.pid is None:  # never started
            return None
        answer = self.request(command or Stop(), Stopped, timeout_s)
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=10)
        return answer


def _spawn_ignoring_sigint(process: Any) -> None:
    """Start `process` with SIGINT ignored, which it inherits: a Ctrl-C while it starts
    up (before it leaves the terminal's process group) cannot reach it. Only the main
    thread may change signal handlers; elsewhere the child relies on `child_process`."""
    if threading.current_thread() is not threading.main_thread():
        process.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def child_process(
    name: str, events: Queue[Event], alert_lines: AlertLineSettings | None = None
) -> Iterator[None]:
    """The body of a child's main: set up as the module describes (alerts it logs printed
    as `alert_lines` say); an exception is reported as a `Failed` event with its reason,
    and the child exits with code 1."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # its log lines reach the terminal from
    # outside the terminal's foreground group
    _end_with_parent(name)
    schedule_full_collections()
    line_format = f"%(asctime)s {name} %(message)s"
    logging.basicConfig(level=logging.WARNING, format=line_format)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    configure_alert_log(line_format, settings=alert_lines)
    try:
        yield
    except BaseException as exc:
        reason = str(exc) if isinstance(exc, OSError | RuntimeError) else _described(exc)
        events.put(Failed(reason))
        events.close()
        events.join_thread()  # the parent gets the reason before the child is gone
        sys.exit(1)


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _end_with_parent(name: str) -> None:
    """Exit at once when the parent process ends (its sentinel pipe closes)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([parent.sentinel])
        with suppress(OSError):  # its stderr may have gone with the parent
            print(f"{name}: the pathgrade up process ended; exiting", file=sys.stderr, flush=True)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
