"""The realtime plane's typed queries on a real chDB store (`deliveries.AlertRecords`): the
highest number per partition (the unnumbered rows left out), a range of numbered alerts
read back in order with a number stored twice once, the keys a partition's earlier reader
alerted, webhook cursors per webhook (the highest saved counts) and a row the store cannot
encode returned, not stored."""

from __future__ import annotations

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.unit.realtime_plane.test_realtime_webhook import alert


def row(partition: int, number: int, key: str, detected_at_ns: int = 3) -> list:
    found = alert().model_copy(update={"alert_key": key, "detected_at_ns": detected_at_ns})
    return [*found.row(), partition, number]


def test_numbers_and_a_range_of_numbered_alerts_are_read_back(store: ClientStore) -> None:
    records = AlertRecords(store)
    records.insert_alerts([row(-1, 0, "unnumbered-0"), row(-1, 0, "unnumbered-1")])
    records.insert_alerts([row(21, n, f"p21-{n}") for n in (1, 2, 3, 4)])
    records.insert_alerts([row(21, 2, "p21-2"), row(22, 7, "p22-7")])  # number 2 again
    latest = records.latest_numbers()
    assert latest[21] == 4 and latest[22] == 7 and -1 not in latest
    read = records.numbered_alerts(21, 2, 9, limit=2)
    assert [(n, a.alert_key) for n, a in read] == [(2, "p21-2"), (3, "p21-3")]
    assert all(isinstance(a, Alert) for _, a in read)
    assert records.numbered_alerts(21, 5, 9, limit=10) == []


def test_what_a_partition_alerted_since_a_time(store: ClientStore) -> None:
    records = AlertRecords(store)
    records.insert_alerts([row(31, 1, "old", 100), row(31, 2, "new", 200), row(32, 1, "x", 300)])
    trace = ("t", "ab" * 16)
    assert records.alerted_since({31}, 150) == {trace: {"new"}}
    assert records.alerted_since({31, 32}, 0) == {trace: {"old", "new", "x"}}
    assert records.alerted_since({33}, 0) == {}


def test_webhook_cursors_are_kept_per_webhook_and_the_highest_counts(store: ClientStore) -> None:
    records = AlertRecords(store)
    records.save_webhook_cursors("hook-a", {1: 5, 2: 3}, saved_at_ns=1)
    records.save_webhook_cursors("hook-a", {1: 4}, saved_at_ns=2)  # an older cursor saved late
    records.save_webhook_cursors("hook-b", {1: 9}, saved_at_ns=3)
    records.save_webhook_cursors("hook-c", {}, saved_at_ns=4)  # nothing to save
    assert records.webhook_cursors("hook-a") == {1: 5, 2: 3}
    assert records.webhook_cursors("hook-b") == {1: 9}
    assert records.webhook_cursors("hook-c") == {}


def test_a_row_the_store_cannot_encode_is_returned_and_the_others_stored(
    store: ClientStore,
) -> None:
    records = AlertRecords(store)
    bad = row(41, 2, "p41-bad")
    bad[ALERT_COLUMNS.index("DetectedAtNs")] = 2**70  # no Int64 holds it
    rejected = records.insert_encodable_alerts([row(41, 1, "p41-1"), bad, row(41, 3, "p41-3")])
    assert [r[0][0] for r in rejected] == ["p41-bad"]
    read = records.numbered_alerts(41, 1, 3, limit=10)
    assert [a.alert_key for _, a in read] == ["p41-1", "p41-3"]
