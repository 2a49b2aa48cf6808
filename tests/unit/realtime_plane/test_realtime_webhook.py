"""WebhookSink: retries 5xx with backoff, gives up on 4xx, sends the alert key as
Idempotency-Key; without the alerts table, drops what does not fit; with it, delivers every
stored alert at least once: what overflowed the queue, what kept failing, and after a
restart what was stored past the saved cursor."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.realtime_plane.delivery import AlertBacklog
from pathgrade.realtime_plane.sinks import NumberedAlert, StoreAlertSink, WebhookSink
from pathgrade.schemas.alerts import Alert

from tests.integration.conftest import wait_until
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)


def alert(code: str = "PG110") -> Alert:
    return Alert(
        alert_key="k" + code, code=code, name="n", severity="high", kind="violation",
        reason="r", trace_id="ab" * 16, span_id="cd" * 8, tenant="t", service="s", agent="a",
        conversation_id="", risk_tier="medium", policy="default", trace_start_ns=1,
        trace_end_ns=2, detected_at_ns=3,
    )  # fmt: skip


def numbered(alerts: list[Alert], partition: int = 0, first: int = 1) -> list[NumberedAlert]:
    return [NumberedAlert(partition, first + n, a) for n, a in enumerate(alerts)]


class Receiver(ThreadingHTTPServer):
    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses = statuses  # answered in turn; 200 once exhausted
        self.bodies: list[dict] = []
        self.keys: list[str] = []  # Idempotency-Key of each delivered body
        self.calls = 0


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        status = server.statuses[server.calls] if server.calls < len(server.statuses) else 200
        server.calls += 1
        if status == 200:
            server.bodies.append(json.loads(body))
            server.keys.append(self.headers["Idempotency-Key"])
        self.send_response(status)
        self.end_headers()


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(request.param)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def url(server: Receiver) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/alerts"


@pytest.mark.parametrize("receiver", [[500, 503]], indirect=True)
def test_5xx_is_retried_until_delivered(receiver: Receiver) -> None:
    sink = WebhookSink(url(receiver), backoff_s=0.01)
    sink.add(numbered([alert()]))
    sink.close()
    assert receiver.calls == 3 and sink.stats.retried == 2 and sink.stats.sent == 1
    assert receiver.bodies[0]["code"] == "PG110" and receiver.bodies[0]["schema_version"] == 1
    assert receiver.keys == ["kPG110"]  # the alert key, for receivers to drop repeats
    assert sink.cursors() == {0: 2}


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
def test_4xx_fails_without_retry_and_is_counted(receiver: Receiver) -> None:
    sink = WebhookSink(url(receiver), backoff_s=0.01)
    sink.add(numbered([alert("PG101"), alert("PG102")]))
    sink.close()
    assert (sink.stats.failed, sink.stats.sent, receiver.calls) == (1, 1, 2)
    assert sink.cursors() == {0: 3}  # refused for good: passed over


def test_without_the_table_an_unreachable_webhook_never_blocks_and_drops() -> None:
    sink = WebhookSink("http://127.0.0.1:9/x", queue_size=2, retries=1, backoff_s=5)
    sink.add(numbered([alert(f"PG1{i:02d}") for i in range(10)]))  # returns at once
    assert sink.stats.dropped == 8 and sink.stats.deferred == 0
    sink.close(timeout_s=1)
    assert sink.stats.sent == 0


class _KeepAliveHandler(_Handler):
    """HTTP/1.1 with keep-alive; closes the connection after every second request, as a
    receiver with a short idle timeout would."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.server.connections.add(self.client_address)  # type: ignore[attr-defined]
        super().do_POST()
        if self.server.calls % 2 == 0:
            self.close_connection = True

    def end_headers(self) -> None:
        self.send_header("Content-Length", "0")
        super().end_headers()


def test_connections_are_kept_alive_and_reopened_when_the_receiver_closes() -> None:
    server = Receiver([])
    server.RequestHandlerClass = _KeepAliveHandler
    server.connections = set()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = WebhookSink(url(server), workers=1, backoff_s=5.0)  # a retry would show
        sink.add(numbered([alert(f"PG1{n:02d}") for n in range(6)]))
        sink.close(timeout_s=5)
        assert [b["code"] for b in server.bodies] == [f"PG1{n:02d}" for n in range(6)]
        assert (sink.stats.sent, sink.stats.retried, sink.stats.failed) == (6, 0, 0)
        assert len(server.connections) == 3  # type: ignore[attr-defined]
    finally:
        server.shutdown()


def test_malformed_webhook_url_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="alert webhook URL 'localhost:9/x'"):
        WebhookSink("localhost:9/x")


@pytest.fixture(scope="module")
def records(store: ClientStore) -> AlertRecords:
    """The realtime plane's alert tables over the module's store."""
    return AlertRecords(store)


def stored_alerts(records: AlertRecords, prefix: str, count: int, partition: int) -> list:
    """`count` alerts keyed `prefix-N`, numbered on from what `partition` holds, stored
    through the table sink (as the plane stores them)."""
    first = records.latest_numbers().get(partition, 0) + 1
    alerts = numbered(
        [alert().model_copy(update={"alert_key": f"{prefix}-{n}"}) for n in range(count)],
        partition, first,
    )  # fmt: skip
    table = StoreAlertSink(records)
    table.add(alerts)
    table.flush()
    return alerts


def test_what_overflows_the_queue_is_read_back_from_the_table(records: AlertRecords) -> None:
    server = Receiver([503] * 30)  # the receiver fails for a while, then takes everything
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = WebhookSink(
            url(server), queue_size=8, retries=1, backoff_s=0.01,
            backlog=AlertBacklog(records, url(server)),
        )  # fmt: skip
        sink.claim({5}, records.latest_numbers())
        alerts = numbered(
            [alert().model_copy(update={"alert_key": f"over-{n}"}) for n in range(60)], 5
        )
        table = StoreAlertSink(records, sink.stored)
        table.add(alerts)
        sink.add(alerts)  # 8 fit, 52 deferred to the table
        assert sink.stats.deferred >= 52
        table.flush()
        wait_until(lambda: sink.cursors() == {5: 61}, timeout_s=60)
        sink.close()
        assert {b["alert_key"] for b in server.bodies} == {f"over-{n}" for n in range(60)}
        assert sink.stats.dropped == 0 and sink.stats.failed == 0
        assert AlertBacklog(records, url(server)).cursors() == {5: 61}  # saved on close
    finally:
        server.shutdown()


def test_a_restarted_sink_delivers_what_was_stored_past_its_saved_cursor(
    records: AlertRecords,
) -> None:
    """A plane that crashed after storing alerts it had not delivered: the next one on
    the partition reads them back from its saved cursor on, and goes on after them."""
    server = Receiver([])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        first = WebhookSink(url(server), backlog=AlertBacklog(records, url(server)))
        first.claim({7}, records.latest_numbers())
        delivered = stored_alerts(records, "before", 3, 7)
        first.stored({7: delivered[-1].number})  # as the plane's table sink tells it
        first.add(delivered)
        wait_until(lambda: first.cursors() == {7: 4})
        first.close()  # saves cursor 4
        crashed_with = stored_alerts(records, "lost", 4, 7)  # stored, never handed over
        second = WebhookSink(url(server), backlog=AlertBacklog(records, url(server)))
        stored = records.latest_numbers()
        second.claim({7}, stored)
        later = numbered([alert().model_copy(update={"alert_key": "after"})], 7, stored[7] + 1)
        second.add(later)
        wait_until(lambda: second.cursors() == {7: 9})
        second.close()
        keys = [b["alert_key"] for b in server.bodies]
        assert sorted(keys) == sorted([a.alert.alert_key for a in delivered + crashed_with]
                                      + ["after"])  # fmt: skip
        assert len(keys) == len(set(keys))  # the saved cursor held: nothing twice
    finally:
        server.shutdown()


def test_alerts_a_killed_plane_delivered_unstored_do_not_hide_the_next_planes(
    records: AlertRecords,
) -> None:
    """A plane delivers alerts, saves its cursors (every CURSOR_SAVE_S, or here on close)
    before the alerts are stored, and is killed: their numbers were never stored, so the
    next plane on the partition numbers its own alerts (other traces first) on from what
    the table holds, the same numbers again. Those of its alerts that overflow the queue
    are read back from the table and delivered: the saved cursor did not count the dead
    plane's unstored numbers as delivered (CI: one PG115 after a SIGKILL never arrived)."""
    server = Receiver([])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dead = WebhookSink(url(server), backlog=AlertBacklog(records, url(server)))
        held = records.latest_numbers()
        dead.claim({15}, held)
        unstored = numbered(
            [alert().model_copy(update={"alert_key": f"dead-{n}"}) for n in range(3)],
            15, held.get(15, 0) + 1,
        )  # fmt: skip
        dead.add(unstored)
        wait_until(lambda: dead.cursors()[15] == unstored[-1].number + 1)
        dead.close()  # saves the cursors as the periodic save does; then the kill
        stored = records.latest_numbers()
        assert stored.get(15, 0) == held.get(15, 0)  # the dead plane stored none of them
        restarted = WebhookSink(
            url(server), queue_size=2, backlog=AlertBacklog(records, url(server))
        )
        restarted.claim({15}, stored)
        again = numbered(
            [alert().model_copy(update={"alert_key": f"again-{n}"}) for n in range(4)],
            15, stored.get(15, 0) + 1,
        )  # fmt: skip
        table = StoreAlertSink(records, restarted.stored)
        table.add(again)
        restarted.add(again)  # two fit in the queue, two are deferred to the table
        assert restarted.stats.deferred == 2
        table.flush()
        wait_until(lambda: restarted.cursors() == {15: again[-1].number + 1}, timeout_s=30)
        restarted.close()
        assert {a.alert.alert_key for a in again} <= set(server.keys)
        assert AlertBacklog(records, url(server)).cursors()[15] == again[-1].number + 1
    finally:
        server.shutdown()


def test_a_webhook_never_delivered_starts_after_what_is_stored(records: AlertRecords) -> None:
    stored_alerts(records, "history", 2, 9)
    server = Receiver([])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fresh = WebhookSink(
            url(server) + "?new", backlog=AlertBacklog(records, url(server) + "?new")
        )
        fresh.claim({9}, records.latest_numbers())
        fresh.close()
        assert server.bodies == []  # a new webhook does not get the history
        assert AlertBacklog(records, url(server) + "?new").cursors() == {9: 3}
    finally:
        server.shutdown()


def test_an_alert_handed_over_while_its_partition_is_released_skips_nothing(
    records: AlertRecords,
) -> None:
    """The receiver down with an alert stored and undelivered, the partition released (its
    cursor saved before that alert) and a later alert handed over before the partition is
    claimed again (a tick that was under way): once the receiver is back, both arrive. The
    later alert must not start a cursor of its own past the undelivered one."""
    server = Receiver([503] * 10**6)  # down until its statuses are emptied
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = WebhookSink(
            url(server), retries=0, backoff_s=0.01, backlog=AlertBacklog(records, url(server))
        )
        sink.claim({11}, records.latest_numbers())
        pending = stored_alerts(records, "pending", 1, 11)
        sink.stored({11: pending[0].number})
        sink.add(pending)  # fails: deferred to the table, again and again
        sink.release({11})  # saves the cursor at the pending alert
        later = stored_alerts(records, "later", 1, 11)
        sink.add(later)  # handed over while the sink holds no partition 11
        sink.claim({11}, records.latest_numbers())
        server.statuses = []  # the receiver is back
        wait_until(lambda: sink.cursors() == {11: later[0].number + 1}, timeout_s=60)
        sink.close()
        assert {"pending-0", "later-0"} <= set(server.keys)
        assert AlertBacklog(records, url(server)).cursors()[11] == later[0].number + 1
    finally:
        server.shutdown()


@pytest.mark.parametrize("receiver", [[]], indirect=True)
def test_an_alert_handed_over_alone_wakes_a_worker_while_the_table_is_read(
    records: AlertRecords, receiver: Receiver
) -> None:
    """Alerts handed over one at a time, each once the one before was delivered: every one
    is sent at once. The thread that reads the table back waits on its own, so the wake-up
    meant for a worker (one alert: one) cannot go to it and leave the alert in the queue."""
    sink = WebhookSink(url(receiver), workers=1, backlog=AlertBacklog(records, url(receiver)))
    sink.claim({13}, records.latest_numbers())
    first = records.latest_numbers().get(13, 0) + 1
    alerts = numbered(
        [alert().model_copy(update={"alert_key": f"alone-{n}"}) for n in range(40)], 13, first
    )
    try:
        for one in alerts:
            sink.add([one])
            wait_until(lambda one=one: sink.cursors()[13] > one.number, 10, interval_s=0.01)
    finally:
        sink.close()
    assert receiver.keys == [a.alert.alert_key for a in alerts]
