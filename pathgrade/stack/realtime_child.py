"""The embedded stack's realtime child process: its entry point, apart from the stack's
own module so that the spawned interpreter imports only what the realtime plane needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.batch_plane.store.remote import RemoteStore
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.counters import AssemblerStats, RealtimeCounters
from pathgrade.stack.alert_lines import AlertLineSettings
from pathgrade.stack.children import SharedCounters, child_process
from pathgrade.stack.messages import (
    Command,
    Counted,
    Event,
    HandOver,
    Prepare,
    Prepared,
    Ready,
    RealtimeStopped,
    Stats,
    Stop,
    Suspended,
)

if TYPE_CHECKING:
    from multiprocessing.queues import Queue


def realtime_main(
    config: dict[str, Any],
    store_url: str,
    token: str,
    alert_lines: AlertLineSettings,
    joined: Any,
    counters: SharedCounters[RealtimeCounters],
    assembler_stats: SharedCounters[AssemblerStats],
    events: Queue[Event],
    commands: Queue[Command],
) -> None:
    """Child process: the realtime plane (its own interpreter, so detection never waits
    on the store writer), storing alerts through the store owner's endpoint, printing
    them as `alert_lines` say, setting the shared Event `joined` once its consumer group
    hands it partitions and counting into the shared `counters` and `assembler_stats`.
    `Stop` carries the offsets to read up to and whether to evaluate every held trace,
    and answers with the partitions it read up to and its final counters
    (`RealtimeStopped`). `Prepare` joins the group on a fresh broker beside the current
    one; `HandOver` reads the current one up to its offsets, evaluates every trace held
    and moves to the fresh one."""
    # imported here: the stack's own process imports this module only to name the entry point
    from pathgrade.realtime_plane.plane import RealtimePlane

    with child_process("realtime", events, alert_lines):
        store = RemoteStore(store_url, token)
        plane = RealtimePlane(
            RealtimeConfig.model_validate(config),
            AlertRecords(store),
            monitor_reads=MonitorQueries(store),
        )
        plane.counters_ = counters.counters()
        plane.assembler.stats = assembler_stats.counters()
        plane.joined = joined
        plane.start()
        events.put(Ready())
        while True:
            command = commands.get()
            if isinstance(command, Prepare):
                events.put(Prepared(plane.prepare(command.bootstrap)))
            elif isinstance(command, HandOver):
                events.put(Suspended(plane.hand_over(command.targets)))
            elif isinstance(command, Stats):
                events.put(Counted(plane.counters()))
            elif isinstance(command, Stop):
                reached = plane.stop(command.targets, command.release_held)
                events.put(RealtimeStopped(plane.counters(), reached))
                return
