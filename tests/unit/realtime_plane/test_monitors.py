"""The monitor runner over rollups in a real chDB store, on a clock the test sets: episodes
open once and close once, survive a new runner (a restart), and an alert is stored before
it is handed on (a failed insert changes nothing and is tried again)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.realtime_plane.delivery import MONITOR_STREAM
from pathgrade.realtime_plane.monitors import MonitorRunner
from pathgrade.realtime_plane.sinks import NumberedAlert
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.rollups import ROLLUP_COLUMNS, RollupKey

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

BUCKET = 10
POLICY = {
    "every_s": 3600, "bucket_s": BUCKET, "settle_s": 0, "resamples": 2000, "resolve_after_s": 0,
    "objectives": [{
        "name": "tool-errors", "good": "no_tool_error", "objective": 0.99, "min_turns": 50,
        "windows": [{"long_s": 60, "short_s": 20, "burn_rate": 5, "severity": "high"}],
    }],
}  # fmt: skip


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Runner:
    """A MonitorRunner of `policy` on the module's store with a clock, collecting what it
    hands on."""

    def __init__(self, store: Any, policy: dict, start: float, tenant_store: Any = None) -> None:
        self.clock = Clock(start)
        self.emitted: list[NumberedAlert] = []
        self.runner = MonitorRunner(
            MonitorsPolicy.model_validate(policy), "policy.yaml", MonitorQueries(store),
            AlertRecords(tenant_store or store),
            lambda: AlertRecords(store).latest_numbers().get(MONITOR_STREAM, 0) + 1,
            self.emitted.append,
            self.clock,
        )  # fmt: skip
        self.runner.claim()
        assert self.runner.ready.wait(30)

    def at(self, now: float) -> list[Alert]:
        """Tick at `now`; the alerts handed on by this tick."""
        before = len(self.emitted)
        self.clock.now = now
        self.runner.tick_now()
        return [numbered.alert for numbered in self.emitted[before:]]

    def close(self) -> None:
        self.runner.release()


def insert_turns(store: ClientStore, tenant: str, start: int, errors: list[int], turns: int = 100,
                 name: str = "tool_error", slice_: str = "") -> None:  # fmt: skip
    """Buckets from `start`: `turns` turns each, `errors[i]` of them bad in bucket i."""
    rows = []
    for index, bad in enumerate(errors):
        bucket = start + index * BUCKET
        rows.append(
            RollupKey(tenant, "turns", "turns", "svc", "agent", slice_, bucket).row(turns, [])
        )
        if bad:
            key = RollupKey(tenant, "turns", name, "svc", "agent", slice_, bucket)
            rows.append(key.row(bad, [f"{index:032x}/{1:016x}"]))
    store.insert("monitor_rollups", rows, list(ROLLUP_COLUMNS))


def test_a_ramp_fires_within_the_fast_window_once_and_resolves_once_after_it(
    store: ClientStore,
) -> None:
    start = 1_900_000_000
    steady, ramp = [1] * 12, [1, 2, 4, 6, 8, 10, 10, 10, 10, 10]
    insert_turns(store, "ramp", start, steady + ramp + [1] * 12)
    runner = Runner(store, POLICY, start)
    ramp_start = start + len(steady) * BUCKET
    moments: list[tuple[Alert, int]] = []
    try:
        for now in range(start + 60, start + 34 * BUCKET + 1, BUCKET):
            moments += [(alert, now) for alert in runner.at(now) if alert.tenant == "ramp"]
    finally:
        runner.close()
    assert [alert.details["state"] for alert, _ in moments] == ["firing", "resolved"]
    (firing, fired_at), (resolved, resolved_at) = moments
    # within its fast (long) window of the ramp's start, and after the errors reached 5%
    assert ramp_start + 3 * BUCKET <= fired_at <= ramp_start + 60
    ramp_end = ramp_start + len(ramp) * BUCKET
    assert ramp_end < resolved_at <= ramp_end + 20 + BUCKET
    assert firing.details["episode"] == resolved.details["episode"]
    assert firing.alert_key != resolved.alert_key
    assert (firing.code, firing.kind, firing.severity, firing.name) == (
        "PG200",
        "monitor",
        "high",
        "tool-errors",
    )
    assert firing.trace_id and firing.details["examples"]  # an example turn of the window
    assert "had a failed tool call over the last 20s" in firing.reason
    assert "above 5x" in firing.reason and "not above 5x" in resolved.reason
    stored = store.query(
        "SELECT count() FROM alerts FINAL WHERE Kind = 'monitor' AND Tenant = 'ramp'"
    ).rows[0][0]
    assert stored == 2  # each stored before it was handed on


def test_steady_noise_around_the_objective_fires_nothing(store: ClientStore) -> None:
    start = 1_900_100_000
    noise = [0, 1, 3, 1, 0, 2, 1, 4, 0, 1, 2, 1, 3, 0, 1, 2, 1, 0, 4, 1] * 3  # 1.4% mean
    insert_turns(store, "steady", start, noise)
    runner = Runner(store, POLICY, start)
    try:
        alerts = [a for now in range(start + 60, start + 600, BUCKET) for a in runner.at(now)]
    finally:
        runner.close()
    assert [a for a in alerts if a.tenant == "steady"] == []
    ticks = MonitorQueries(store).ticks((start + 60) * 10**9, (start + 600) * 10**9, "tool-errors")
    steady = [t for t in ticks if t.tenant == "steady"]
    assert len(steady) == 54 and {t.state for t in steady} == {"ok"}
    assert max(t.figure for t in steady if t.figure is not None) < 5  # the threshold


def test_a_figure_flapping_around_its_threshold_stays_one_episode(store: ClientStore) -> None:
    """With `resolve_after_s`, one clear tick in the middle of a burn resolves nothing; the
    episode resolves once the condition has stayed clear that long."""
    start = 1_900_150_000
    # 10% bad, one bucket of 0 (the short window's burn drops to 5x: clear), 10% again, clean
    insert_turns(store, "flap", start, [10] * 8 + [0] + [10] * 4 + [0] * 8)
    runner = Runner(store, {**POLICY, "resolve_after_s": 30}, start)
    try:
        states = {
            now - start: [a.details["state"] for a in runner.at(now) if a.tenant == "flap"]
            for now in range(start + 60, start + 220, BUCKET)
        }
    finally:
        runner.close()
    assert {t: s for t, s in states.items() if s} == {60: ["firing"], 170: ["resolved"]}
    flapping = MonitorQueries(store).ticks((start + 100) * 10**9, (start + 101) * 10**9)
    assert [t.details["holds"] for t in flapping if t.tenant == "flap"] == [False]


def test_a_new_runner_neither_fires_again_nor_forgets_to_resolve(store: ClientStore) -> None:
    start = 1_900_200_000
    insert_turns(store, "restart", start, [10] * 12 + [0] * 6)
    first = Runner(store, POLICY, start)
    try:
        fired = [a for a in first.at(start + 60) if a.tenant == "restart"]
    finally:
        first.close()
    assert [a.details["state"] for a in fired] == ["firing"]
    second = Runner(store, POLICY, start + 60)  # a restarted plane: state read back
    try:
        still = [a for a in second.at(start + 100) if a.tenant == "restart"]
        cleared = [a for a in second.at(start + 150) if a.tenant == "restart"]
    finally:
        second.close()
    assert still == []  # the condition still holds: the same episode, no second firing
    assert [a.details["state"] for a in cleared] == ["resolved"]
    assert cleared[0].details["episode"] == fired[0].details["episode"]
    numbers = store.query(
        "SELECT PartitionSeq FROM alerts FINAL WHERE Kind = 'monitor' AND Tenant = 'restart' "
        "ORDER BY PartitionSeq"
    ).rows
    assert [n for (n,) in numbers] == sorted({n for (n,) in numbers})  # numbered apart
    assert all(r.partition == MONITOR_STREAM for r in second.emitted)


class RefusingStore:
    """The store, refusing inserts into `alerts` while `refuse` is set."""

    def __init__(self, store: ClientStore) -> None:
        self.store = store
        self.refuse = True

    def insert(self, table: str, rows: list, columns: list) -> None:
        if self.refuse and table == "alerts":
            raise ConnectionError("the store is down")
        self.store.insert(table, rows, columns)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        return self.store.query(*args, **kwargs)


def test_an_alert_the_store_refused_is_not_handed_on_and_fires_at_the_next_tick(
    store: ClientStore,
) -> None:
    start = 1_900_300_000
    insert_turns(store, "refused", start, [10] * 12)
    refusing = RefusingStore(store)
    runner = Runner(store, POLICY, start, tenant_store=refusing)
    try:
        assert [a for a in runner.at(start + 60) if a.tenant == "refused"] == []
        assert runner.runner.stats.monitor_failures >= 1
        refusing.refuse = False
        retried = [a for a in runner.at(start + 70) if a.tenant == "refused"]
    finally:
        runner.close()
    assert [a.details["state"] for a in retried] == ["firing"]


class GatedStore:
    """The store, holding each insert into `alerts` until `gate` is set (`entered` says one
    is waiting): a tick under way."""

    def __init__(self, store: ClientStore) -> None:
        self.store = store
        self.entered = threading.Event()
        self.gate = threading.Event()

    def insert(self, table: str, rows: list, columns: list) -> None:
        if table == "alerts":
            self.entered.set()
            assert self.gate.wait(30)
        self.store.insert(table, rows, columns)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        return self.store.query(*args, **kwargs)


def test_a_release_waits_for_the_tick_under_way_and_no_tick_stores_after_it(
    store: ClientStore,
) -> None:
    """Partition 0 moving away while a tick stores an alert: the alert is stored and
    handed on before `release` returns (the webhook then saves its cursor with it held),
    never after, when the sink no longer holds the monitors' stream."""
    start = 1_900_400_000
    insert_turns(store, "moved", start, [10] * 12)
    gated = GatedStore(store)
    runner = Runner(store, POLICY, start, tenant_store=gated)
    ticking = threading.Thread(target=runner.at, args=(start + 60,))
    ticking.start()
    assert gated.entered.wait(30)  # the tick is storing its firing
    handed_on_before_release: list[Alert] = []

    def release() -> None:
        runner.runner.release()
        handed_on_before_release.extend(a.alert for a in runner.emitted)

    releasing = threading.Thread(target=release)
    releasing.start()
    releasing.join(0.5)  # the old runner returned here at once, before the alert was stored
    gated.gate.set()
    ticking.join(30)
    releasing.join(30)
    assert [(a.tenant, a.details["state"]) for a in handed_on_before_release] == [
        ("moved", "firing")
    ]
    assert runner.runner.tick(start + 70) is False  # released: nothing evaluated, stored
    assert len(runner.emitted) == 1


RATES = {
    "every_s": 3600, "bucket_s": BUCKET, "settle_s": 0, "resamples": 2000,
    "detector_rates": [{
        "name": "retries", "detector": "PG108", "window_s": 100, "baseline_offset_s": 1000,
        "min_turns": 100, "slice": "service",
    }],
}  # fmt: skip


@pytest.mark.parametrize(
    ("baseline", "current", "fires"),
    [
        ([5] * 10, [10] * 10, True),  # 1% -> 2% of 5,000 turns each: doubled, beyond noise
        ([5] * 10, [5, 10, 5, 5, 10, 5, 5, 10, 5, 5], False),  # 1% -> 1.3%: within noise
    ],
)
def test_a_detector_rate_fires_only_beyond_noise(
    store: ClientStore, baseline: list[int], current: list[int], fires: bool
) -> None:
    start = 1_900_400_000 + (0 if fires else 50_000)
    tenant = f"rate-{fires}"
    insert_turns(store, tenant, start, baseline, turns=500, name="finding:PG108")
    insert_turns(store, tenant, start + 1000, current, turns=500, name="finding:PG108")
    runner = Runner(store, RATES, start + 1100)
    try:
        alerts = [a for a in runner.at(start + 1100) if a.tenant == tenant]
    finally:
        runner.close()
    assert bool(alerts) is fires
    ticks = [t for t in MonitorQueries(store).latest_ticks(0, "retries") if t.tenant == tenant]
    (tick,) = ticks
    assert tick.scope == "service=svc" and tick.low is not None and tick.high is not None
    assert (tick.low > 0) is fires  # the interval, not the ratio, decides
    if fires:
        (alert,) = alerts
        assert alert.service == "svc" and alert.code == "PG201"
        assert "had PG108 findings over the last 100s" in alert.reason
        assert "in the same window 1000s earlier" in alert.reason


def test_a_window_without_data_keeps_an_open_episode_open(store: ClientStore) -> None:
    """A gap (a restart catching up, traffic stopped) neither resolves nor fires again."""
    start = 1_900_500_000
    insert_turns(store, "gap", start, [10] * 8)  # 10% bad, then 40 s of nothing, then clean
    insert_turns(store, "gap", start + 120, [0] * 8)
    runner = Runner(store, POLICY, start)
    try:
        states = {
            now - start: [a.details["state"] for a in runner.at(now) if a.tenant == "gap"]
            for now in range(start + 60, start + 200, BUCKET)
        }
    finally:
        runner.close()
    assert states[60] == ["firing"]
    assert all(states[t] == [] for t in range(70, 130, BUCKET))  # still bad, then the gap
    resolved_at = next(t for t, found in states.items() if found and t > 60)
    assert states[resolved_at] == ["resolved"] and resolved_at > 120  # on data, not on the gap
    ticks = MonitorQueries(store).ticks((start + 100) * 10**9, (start + 121) * 10**9, "tool-errors")
    assert {t.state for t in ticks if t.tenant == "gap"} == {"firing"}  # undecided, still open
