"""The realtime plane's alert table sink over the real embedded store, directly and
through the store owner's loopback endpoint: a row the store cannot encode is found by
halving, logged and dropped, and every other alert of the batch is stored, with its
partition and number; the sink says which numbers are stored."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.store.client import ClientStore, QueryError, RowsRejected
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.batch_plane.store.remote import RemoteStore
from pathgrade.realtime_plane.sinks import NumberedAlert, StoreAlertSink
from pathgrade.schemas.alerts import ALERT_COLUMNS, SEQ_COLUMNS, Alert

from pathgrade.stack.store_endpoint import QueryServer
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.unit.realtime_plane.test_realtime_webhook import alert


@pytest.fixture(scope="module")
def remote(store: ClientStore) -> Iterator[RemoteStore]:
    server = QueryServer(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield RemoteStore(server.url, server.token)
    server.shutdown()


def poisoned(alert: Alert, number: int = 1) -> list:
    """The alert's row (partition 3) with a detection time no Int64 column holds."""
    row = NumberedAlert(3, number, alert).row()
    row[ALERT_COLUMNS.index("DetectedAtNs")] = 2**70
    return row


def stored_keys(store: ClientStore, prefix: str) -> set[str]:
    rows = store.query(
        "SELECT AlertKey FROM alerts_view WHERE startsWith(AlertKey, {p:String})", {"p": prefix}
    ).rows
    return {key for (key,) in rows}


@pytest.mark.parametrize("via", ["direct", "remote"])
def test_a_rejected_row_is_dropped_and_the_others_are_stored(
    store: ClientStore, remote: RemoteStore, via: str, caplog: pytest.LogCaptureFixture
) -> None:
    told: list[dict[int, int]] = []
    sink = StoreAlertSink(AlertRecords(store if via == "direct" else remote), told.append)
    good = [alert(f"PG1{i:02d}").model_copy(update={"alert_key": f"{via}-{i}"}) for i in range(5)]
    bad = alert("PG199").model_copy(update={"alert_key": f"{via}-bad"})
    numbered = [NumberedAlert(3, n + (n > 2), a) for n, a in enumerate(good, start=1)]
    sink.add(numbered[:2])
    sink.pending.append(poisoned(bad, number=3))
    sink.add(numbered[2:])
    sink.flush()
    assert sink.pending == [] and sink.rejected == 1 and sink.inserted == 5
    assert stored_keys(store, f"{via}-") == {a.alert_key for a in good}
    assert f"{via}-bad" in caplog.text and "rejected by the store" in caplog.text
    assert told == [{3: 6}]  # numbers 1-6 tried: the refused one is past too
    rows = store.query(
        "SELECT PartitionSeq, AlertKey FROM alerts WHERE startsWith(AlertKey, {p:String}) "
        "ORDER BY PartitionSeq", {"p": f"{via}-"}
    ).rows  # fmt: skip
    assert rows == [[1, f"{via}-0"], [2, f"{via}-1"], [4, f"{via}-2"], [5, f"{via}-3"],
                    [6, f"{via}-4"]]  # fmt: skip


def test_the_endpoint_tells_a_rejection_from_other_failures(
    store: ClientStore, remote: RemoteStore
) -> None:
    columns = [*ALERT_COLUMNS, *SEQ_COLUMNS]
    with pytest.raises(RowsRejected):
        remote.insert("alerts", [poisoned(alert())], columns)
    with pytest.raises(QueryError) as failure:
        remote.insert("no_such_table", [NumberedAlert(0, 1, alert()).row()], columns)
    assert not isinstance(failure.value, RowsRejected)
    sink = StoreAlertSink(AlertRecords(remote))
    sink.pending.append(NumberedAlert(0, 1, alert()).row())
    # nobody listens: not a rejection
    sink.store = AlertRecords(RemoteStore("http://127.0.0.1:9", "token"))
    with pytest.raises(QueryError):
        sink.flush()
    assert len(sink.pending) == 1 and sink.rejected == 0  # kept for the next try
