"""`pathgrade alerts --follow` over the real embedded store: every alert once, oldest
first, including one stored after a later one, and only those of the chosen code."""

from __future__ import annotations

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.realtime_plane.sinks import NumberedAlert, StoreAlertSink
from pathgrade.schemas.alerts import Alert

from pathgrade.cli.alert_follow import follow
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.unit.realtime_plane.test_realtime_webhook import alert

SECOND = 10**9
BASE = 1_900_000_000 * SECOND  # far from every other test's alerts in this store


def at(key: str, seconds: float, code: str = "PG110") -> Alert:
    return alert(code).model_copy(
        update={"alert_key": key, "reason": key, "detected_at_ns": BASE + int(seconds * SECOND)}
    )


def store_alerts(store: ClientStore, *alerts: Alert) -> None:
    sink = StoreAlertSink(AlertRecords(store))
    sink.add([NumberedAlert(-1, 0, alert) for alert in alerts])  # from no partition
    sink.flush()


def run_follow(store: ClientStore, polls: list, code: str | None = None, start: float = 0.0):
    """Follow for len(polls) + 1 polls, running polls[i]() before poll i+2; returns the
    emitted rows of each poll that emitted, and every poll's `since` (s after BASE)."""
    emitted, sinces = [], []

    def query(sql: str, parameters: dict):
        sinces.append((parameters["since"] - BASE) / SECOND)
        return store.query(sql, parameters, readonly=True)

    def wait(_: float) -> bool:
        if polls:
            polls.pop(0)()
            return False
        return True

    follow(query, code, BASE + int(start * SECOND), lambda r: emitted.append(r.dicts()), wait)
    return emitted, sinces


def test_every_alert_once_oldest_first_even_when_stored_late(store: ClientStore) -> None:
    store_alerts(store, at("f-2", 2), at("f-1", 1), at("f-before", -5))
    late = at("f-3", 3)
    steps = [
        lambda: store_alerts(store, at("f-10", 10)),  # stored before f-3, detected later
        lambda: store_alerts(store, late, at("f-10", 10)),  # f-10 again: a duplicate row
        lambda: None,
    ]
    emitted, sinces = run_follow(store, steps)
    assert [[row["Reason"] for row in poll] for poll in emitted] == [
        ["f-1", "f-2"], ["f-10"], ["f-3"],  # f-before is before the start; f-10 once
    ]  # fmt: skip
    assert sinces == [0.0, 0.0, 0.0, 0.0]  # the 60 s window reaches back past the start


def test_only_the_chosen_code_and_the_window_moves_on(store: ClientStore) -> None:
    store_alerts(store, at("g-1", 101, "PG108"), at("g-2", 102, "PG110"))
    steps = [lambda: store_alerts(store, at("g-3", 300, "PG108")), lambda: None]
    emitted, sinces = run_follow(store, steps, code="PG108", start=100)
    assert [[row["Reason"] for row in poll] for poll in emitted] == [["g-1"], ["g-3"]]
    assert sinces == [100.0, 100.0, 240.0]  # 60 s behind the newest seen, not before start
