"""Whether the pipeline is working, from the running stack's status snapshots
(`pathgrade.stack.status`): what the health page shows and the red banner every page
carries when storing, evaluating or delivering alerts has stopped.

A stage has stopped when spans kept coming in but its counter did not move for at least
STALL_S (or its process does not answer): the store writer's `spans` for storing, the
realtime processes' `traces_evaluated` for evaluating, and for delivering alerts the
webhook's failures and drops and the alerts the table refused. A writer that says it is
stalled on a resource (`schemas.stalls`: the disk full under the collector's log, the store
refusing inserts) is named at once, with why (`stalls_in`). `HealthWatch` keeps the
snapshots it has seen, so it can compare the latest with the newest one at least STALL_S
older (a store writer batching, or the realtime plane's quiet window, is not a stop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pathgrade.realtime_plane.coverage import consumers_coverage
from pathgrade.realtime_plane.delays import MAX, P50, P99
from pathgrade.schemas.stalls import STALLED

STALL_S = 30.0
KEPT_S = 600.0  # snapshots older than this are forgotten
Status = dict[str, Any]
"""`pathgrade up`'s status document: {"snapshot": ..., "line": ...}."""


@dataclass(frozen=True)
class Process:
    """One process's counters as the health page lists them (None: not answering)."""

    name: str
    counters: dict[str, Any] | None


def _total(workers: list[dict[str, Any] | None], key: str) -> int:
    return sum(int(w.get(key, 0)) for w in workers if w)


def stalls_in(snapshot: dict[str, Any]) -> list[str]:
    """What the snapshot's processes are stalled on now, "what (why)" each. A scraped box
    (`scraped_status`) says only that it is stalled; its own /metrics names on what."""
    found = []
    processes = [("collector", snapshot.get("collector")),
                 ("store writer", snapshot.get("store_writer"))]  # fmt: skip
    processes += [(f"realtime-{n}", w) for n, w in enumerate(snapshot.get("realtime") or [], 1)]
    for name, counters in processes:
        stalled = (counters or {}).get(STALLED)
        if isinstance(stalled, dict):
            found += [f"{what} ({why})" for what, why in stalled.items()]
        elif stalled:
            found.append(f"the {name} (its /metrics names what it waits for)")
    return found


def problems(now: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """What is stalled (`stalls_in`), and what has stopped between snapshot `before` and
    snapshot `now` (or, without an earlier one, what does not answer), each as
    `headline: detail` (`headline`)."""
    found = [f"a box does not answer: {where}" for where in now.get("unreachable", [])]
    found += [f"stalled: {stall}" for stall in stalls_in(now)]
    collector, workers = now.get("collector"), now.get("realtime") or []
    if collector is None:
        found.append("receiving has stopped: the collector does not answer")
    if workers and all(w is None for w in workers):
        found.append("evaluating has stopped: no realtime process answers")
    if before is None or collector is None or before.get("collector") is None:
        return found
    arrived = collector.get("accepted_spans", 0) - before["collector"].get("accepted_spans", 0)
    if arrived > 0:
        stored = now["store_writer"].get("spans", 0) - before["store_writer"].get("spans", 0)
        if stored <= 0:
            found.append(f"storing has stopped: {arrived:,} spans arrived, none was stored")
        earlier = before.get("realtime") or []
        evaluated = _total(workers, "traces_evaluated") - _total(earlier, "traces_evaluated")
        if workers and any(workers) and evaluated <= 0:
            found.append(f"evaluating has stopped: {arrived:,} spans arrived, no trace evaluated")
    for key, what in (
        ("webhook_failed", "alerts failed to reach the webhook"),
        ("webhook_dropped", "alerts were dropped before the webhook"),
        ("alerts_rejected", "alerts the alerts table refused"),
    ):
        grown = _total(workers, key) - _total(before.get("realtime") or [], key)
        if grown > 0:
            found.append(f"delivering alerts has stopped: {grown:,} {what} since the last status")
    return found


def headline(problem: str) -> str:
    """What has stopped, without the detail after it (figures of every tenant's traffic,
    the address of a box): what a tenant's viewer is shown."""
    return problem.split(":", 1)[0]


def tenant_coverage(snapshot: dict[str, Any], tenant: str | None) -> list[dict[str, Any]]:
    """The coverage gaps of the realtime processes (`consumers_coverage`), only `tenant`'s
    (every tenant's with None)."""
    rows = consumers_coverage(snapshot.get("realtime") or [])
    return [row for row in rows if tenant is None or row["tenant"] == tenant]


def processes(snapshot: dict[str, Any]) -> list[Process]:
    """Every process of the snapshot with its counters (numbers; the realtime processes'
    structured entries, coverage and detector errors, have sections of their own)."""
    listed = [
        Process("collector", _numbers(snapshot.get("collector"))),
        Process("store writer", _numbers(snapshot.get("store_writer"))),
    ]
    workers = snapshot.get("realtime") or []
    listed += [Process(f"realtime-{n}", _numbers(c)) for n, c in enumerate(workers, 1)]
    return listed


def _numbers(counters: dict[str, Any] | None) -> dict[str, Any] | None:
    if counters is None:
        return None
    return {k: v for k, v in counters.items() if not isinstance(v, dict | list)}


def dead_letters(snapshot: dict[str, Any]) -> list[tuple[str, int]]:
    """What was accepted somewhere but could not go on: (what, how many)."""
    workers = snapshot.get("realtime") or []
    return [
        (
            "spans rejected at the collector",
            (snapshot.get("collector") or {}).get("rejected_spans", 0),
        ),
        ("spans the store could not encode", snapshot["store_writer"].get("rejected_spans", 0)),
        ("alerts the alerts table refused", _total(workers, "alerts_rejected")),
        ("webhook deliveries dropped", _total(workers, "webhook_dropped")),
        (
            "forged messages the store writer refused (no or a wrong MAC)",
            snapshot["store_writer"].get("forged_messages", 0),
        ),
        ("forged messages the realtime plane refused", _total(workers, "forged_messages")),
    ]


def delays(snapshot: dict[str, Any]) -> list[tuple[str, float | None, float | None, float | None]]:
    """Detection delay quantiles (p50, p99, max seconds) of each realtime process."""
    workers = snapshot.get("realtime") or []
    return [
        (f"realtime-{n}", (w or {}).get(P50), (w or {}).get(P99), (w or {}).get(MAX))
        for n, w in enumerate(workers, 1)
    ]


class HealthWatch:
    """Reads the stack's status when asked and remembers the snapshot before the latest."""

    def __init__(self, source: Callable[[], Status | None], stall_s: float = STALL_S) -> None:
        self.source = source
        self.stall_s = stall_s
        self._seen: list[dict[str, Any]] = []  # snapshots, oldest first
        self._lock = threading.Lock()

    def status(self) -> tuple[Status | None, list[str]]:
        """The latest status document and what has stopped."""
        document = self.source()
        if not document:
            return None, []
        snapshot = document["snapshot"]
        now = snapshot["taken_at"]
        with self._lock:
            if not self._seen or now != self._seen[-1]["taken_at"]:
                self._seen = [s for s in self._seen if now - s["taken_at"] <= KEPT_S]
                self._seen.append(snapshot)
            older = [s for s in self._seen if now - s["taken_at"] >= self.stall_s]
        return document, problems(snapshot, older[-1] if older else None)
