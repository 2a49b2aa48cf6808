"""MonitorRunner: evaluates the policy's monitors (docs/monitors.md) every `every_s` in a
thread of its own, in the one realtime consumer of the group that owns partition 0 of
`pathgrade.spans` (it moves with that partition on a rebalance).

Each tick reads the rollups of every monitor's windows (`MonitorReads`, the store's typed
queries: `batch_plane.store.monitors`, handed in by whoever builds the plane), works out
the figures per tenant and scope (`monitor_figures`), opens and closes episodes
(`monitor_alerts`) and writes what it found to `monitor_ticks`.

An episode's alert is written ahead: it is inserted into the alerts table (numbered in the
monitors' own stream, MONITOR_STREAM, for the webhook's at-least-once delivery) before it
goes to the log line, the alerts topic and the webhook, and the episode changes only once
the insert succeeded. A runner that starts (a restarted plane, or a new owner of
partition 0) reads the latest record of every scope back first (`Episodes.restore`), so a
condition that still holds does not fire again, and one that cleared resolves the episode
that fired before; a record stored but not yet delivered when the plane died reaches the
webhook from the table, as every stored alert does. Nothing here waits on the plane's
polling thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from pathgrade.detectors.monitor_policy import (
    DetectorRateMonitor,
    Monitor,
    MonitorsPolicy,
    ObjectiveMonitor,
    monitor_kind,
)
from pathgrade.realtime_plane.delivery import MONITOR_STREAM
from pathgrade.realtime_plane.monitor_alerts import Episodes, monitor_alert, trace_filter
from pathgrade.realtime_plane.monitor_figures import (
    Figures,
    objective_figures,
    objective_selection,
    objective_span,
    rate_figures,
    score_figures,
    selection,
    window_end,
)
from pathgrade.realtime_plane.sinks import NumberedAlert
from pathgrade.schemas.alert_store import AlertStore
from pathgrade.schemas.monitors import (
    BucketCount,
    EpisodeRecord,
    MonitorState,
    MonitorTick,
    RollupSelection,
)
from pathgrade.schemas.rollups import TURNS

log = logging.getLogger(__name__)
RETRY_S = 5.0  # how soon a runner that could not read its state from the store tries again
READY_WAIT_S = 60.0  # how long `tick_now` waits for the runner to have read its state


class MonitorReads(Protocol):
    """What the runner reads and writes in the store (`batch_plane.store.monitors`)."""

    def bucket_counts(
        self, selection: RollupSelection, start_s: int, end_s: int
    ) -> list[BucketCount]: ...

    def examples(
        self,
        selection: RollupSelection,
        tenant: str,
        scope: str,
        start_s: int,
        end_s: int,
        limit: int,
    ) -> list[tuple[str, str]]: ...

    def episodes(self) -> list[EpisodeRecord]: ...

    def write_ticks(self, ticks: Iterable[MonitorTick]) -> None: ...


@dataclass
class MonitorStats:
    monitor_ticks: int = 0
    monitor_alerts: int = 0  # episodes opened and closed (stored, then delivered)
    monitor_failures: int = 0  # reads, inserts or writes that failed (logged; tried again)


class MonitorRunner:
    """The monitors of one policy, evaluated while `claim`ed (`release` stops them)."""

    def __init__(
        self,
        monitors: MonitorsPolicy,
        policy_name: str,
        reads: MonitorReads,
        alerts: AlertStore,
        prepare: Callable[[], int],
        emit: Callable[[NumberedAlert], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`alerts` stores the episodes' alerts (the store room's `AlertStore`); `prepare()`
        claims the monitors' stream of alert numbers for delivery and returns the next
        number; `emit` hands a stored alert to the other sinks; `clock` is Unix
        seconds (injectable: tests set the time)."""
        self.monitors = monitors
        self.policy_name = policy_name
        self.reads = reads
        self.alerts = alerts
        self.prepare = prepare
        self.emit = emit
        self.clock = clock
        self.stats = MonitorStats()
        self.episodes = Episodes(monitors.resolve_after_s)
        self.ready = threading.Event()  # the state is read back and the numbering known
        self._next_number = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> None:
        """Start evaluating (this consumer got partition 0); a running runner goes on."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self.ready.clear()
        self._thread = threading.Thread(target=self._run, name="monitors", daemon=True)
        self._thread.start()

    def release(self, timeout_s: float = 30.0) -> None:
        """Stop evaluating (partition 0 went elsewhere, or the plane stops). Returns once no
        tick is under way (one running in another thread finishes first, for up to
        `timeout_s`), so no alert of the monitors is handed on after it: their stream's next
        owner delivers from the saved cursor on (one a tick still hands on after that is
        left to the table by the webhook, which then holds no monitor stream)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._thread = None
        idle = self._lock.acquire(timeout=timeout_s)
        self.ready.clear()
        if idle:
            self._lock.release()
        else:
            log.warning("monitors: a tick still under way after %.0f s; released", timeout_s)

    def tick_now(self) -> None:
        """Evaluate every monitor at `clock()` now (once the state is read back; a tick
        cut off by a `release` waits for the next `claim`)."""
        deadline = time.monotonic() + READY_WAIT_S
        while self.ready.wait(max(0.0, deadline - time.monotonic())):
            if self.tick(self.clock()):
                return
        raise RuntimeError("the monitors have not read their state from the store")

    def _run(self) -> None:
        while not self._stop.is_set() and not self.ready.is_set():
            try:
                with self._lock:
                    self._next_number = self.prepare()
                    self.episodes.restore(self.reads.episodes())
                self.ready.set()
            except Exception as exc:  # the store's QueryError or transport errors
                self.stats.monitor_failures += 1
                log.warning("monitors: reading their state from the store failed: %s; "
                            "retrying in %.0f s", exc, RETRY_S)  # fmt: skip
                self._stop.wait(RETRY_S)
        while not self._stop.is_set():
            self.tick(self.clock())
            self._stop.wait(self.monitors.every_s)

    def tick(self, now_s: float) -> bool:
        """Evaluate every monitor at `now_s` (Unix seconds): open and close episodes, write
        the ticks. A monitor whose reads fail is skipped this time (logged, counted). False
        when the runner is not claimed (released, or its state not yet read): nothing is
        evaluated."""
        now_ns = int(now_s * 1e9)
        end_s = window_end(now_s, self.monitors)
        ticks: list[MonitorTick] = []
        with self._lock:
            if not self.ready.is_set():
                return False
            for monitor in self.monitors.all():
                try:
                    found = self._figures(monitor, end_s)
                except Exception as exc:  # the store's QueryError or transport errors
                    self.stats.monitor_failures += 1
                    log.warning("monitor %s: reading its rollups failed: %s", monitor.name, exc)
                    continue
                for figures in found:
                    self._settle(monitor, figures, now_ns)
                    ticks.append(self._tick(monitor, figures, now_ns))
            self.stats.monitor_ticks += 1
        try:
            self.reads.write_ticks(ticks)
        except Exception as exc:  # the store's QueryError or transport errors
            self.stats.monitor_failures += 1
            log.warning("monitors: writing their figures failed: %s", exc)
        return True

    def _figures(self, monitor: Monitor, end_s: int) -> list[Figures]:
        reads = self.reads
        if isinstance(monitor, ObjectiveMonitor):
            span = objective_span(monitor)
            counts = reads.bucket_counts(objective_selection(monitor), end_s - span, end_s)
            return objective_figures(monitor, counts, end_s)
        start = end_s - monitor.window_s
        base_start, base_end = monitor.baseline_range(start, end_s)
        if isinstance(monitor, DetectorRateMonitor):
            chosen = selection(monitor, (TURNS, monitor.counter))
            current = reads.bucket_counts(chosen, start, end_s)
            baseline = reads.bucket_counts(chosen, base_start, base_end)
            return rate_figures(monitor, current, baseline, end_s, self.monitors)
        chosen = selection(monitor, (monitor.metric,))
        current = reads.bucket_counts(chosen, start, end_s)
        baseline = reads.bucket_counts(chosen, base_start, base_end)
        return score_figures(monitor, current, baseline, end_s, self.monitors)

    def _settle(self, monitor: Monitor, figures: Figures, now_ns: int) -> None:
        """Open or close the scope's episode if the figures say so, its alert stored first."""
        change = self.episodes.change(monitor, figures, now_ns)
        if change is None:
            return
        episode = self.episodes.episode(monitor, figures, now_ns)
        try:
            examples = self._examples(figures) if change == "fire" else []
            alert = monitor_alert(
                monitor, figures, change, episode, self.monitors, self.policy_name, now_ns,
                examples,
            )  # fmt: skip
            numbered = NumberedAlert(MONITOR_STREAM, self._next_number, alert)
            self._next_number += 1  # used even if the insert fails: it may have landed
            self.alerts.insert_alerts([numbered.row()])
        except Exception as exc:  # the store's QueryError or transport errors
            self.stats.monitor_failures += 1
            log.warning("monitor %s: storing its alert failed (tried again next tick): %s",
                        monitor.name, exc)  # fmt: skip
            return
        self.episodes.record(monitor, figures, change, episode)
        self.stats.monitor_alerts += 1
        self.emit(numbered)

    def _examples(self, figures: Figures) -> list[tuple[str, str]]:
        if figures.examples is None or not self.monitors.examples:
            return []
        start, end = figures.window
        return self.reads.examples(
            figures.examples, figures.tenant, figures.scope, start, end, self.monitors.examples
        )

    def _tick(self, monitor: Monitor, figures: Figures, now_ns: int) -> MonitorTick:
        opened = self.episodes.open.get((figures.tenant, monitor.name, figures.scope))
        state: MonitorState = (
            "firing" if opened is not None else "ok" if figures.decided else "no_data"
        )
        start, end = figures.window
        return MonitorTick(
            tenant=figures.tenant, monitor=monitor.name, kind=monitor_kind(monitor),
            scope=figures.scope, service=monitor.service or "", agent=monitor.agent or "",
            tick_ns=now_ns, window_start_ns=start * 10**9, window_end_ns=end * 10**9,
            figure=figures.figure, threshold=figures.threshold, low=figures.low,
            high=figures.high, current=figures.current, baseline=figures.baseline,
            items=figures.items, baseline_items=figures.baseline_items, state=state,
            episode=opened.episode if opened else "",
            details={
                "severity": figures.severity, "holds": figures.holds,
                "traces": trace_filter(monitor, figures.scope), **figures.details,
            },
        )  # fmt: skip
