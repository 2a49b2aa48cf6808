"""The realtime plane hands alerts to its sinks in groups, not one evaluation at a time, and
never commits past alerts it has not handed over."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.detectors import default_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.evaluate import Evaluation
from pathgrade.realtime_plane.plane import ALERTS_PER_DELIVERY, IDLE_POLL_MS, RealtimePlane
from pathgrade.realtime_plane.sinks import (
    LogAlertSink,
    NumberedAlert,
    StoreAlertSink,
    TopicAlertSink,
)
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.model import Span, Trace
from pathgrade.schemas.store import QueryResult, RejectedRow, Store
from pathgrade.schemas.topics import ALERT_LOGGER


class RecordingSink:
    """Stands in for the webhook sink: records each `add` call's alerts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.numbers: list[tuple[int, int]] = []

    def add(self, alerts: list[NumberedAlert]) -> None:
        self.calls.append([numbered.alert.alert_key for numbered in alerts])
        self.numbers += [(numbered.partition, numbered.number) for numbered in alerts]

    def claim(self, partitions: set[int], stored: dict[int, int]) -> None:
        pass

    def stored(self, numbers: dict[int, int]) -> None:
        pass


def plane_with_sink(
    clock: Callable[[], float] = time.monotonic,
) -> tuple[RealtimePlane, RecordingSink]:
    config = RealtimeConfig(
        bootstrap_servers="127.0.0.1:1", alerts_topic=None, sampled_topic=None, turns_topic=None
    )
    plane = RealtimePlane(config, clock=clock)
    sink = RecordingSink()
    plane.webhook = sink  # type: ignore[assignment]
    plane.sinks.append(sink)
    return plane, sink


def alert(trace_id: str, span_id: str, key: str) -> Alert:
    return Alert(
        alert_key=key, code="PG101", name="tool_error", severity="high", kind="violation",
        reason="failed", trace_id=trace_id, span_id=span_id, tenant="t", service="s",
        agent="a", conversation_id="", risk_tier="medium", policy="default",
        trace_start_ns=1, trace_end_ns=2, detected_at_ns=3,
    )  # fmt: skip


def evaluation(number: int, alerts: int, partition: int = 0) -> Evaluation:
    trace_id = f"{number:032x}"
    span = Span("t", trace_id, "00000000000000aa", "", "invoke_agent", "Internal", 1, 2)
    found = [alert(trace_id, span.span_id, f"{number}-{k}") for k in range(alerts)]
    due = DueTurn(Trace("t", trace_id, [span]), "max_age", False, partition)
    return Evaluation(
        due, "s", "a", "", "medium", [], found, None, default_policy().resolve().context()
    )


def test_alerts_reach_the_sinks_in_groups_and_all_of_them_at_the_end_of_a_poll() -> None:
    plane, sink = plane_with_sink()
    for number in range(ALERTS_PER_DELIVERY):  # 2 alerts per trace
        plane._emit(evaluation(number, 2))
    assert [len(call) for call in sink.calls] == [ALERTS_PER_DELIVERY] * 2
    plane._emit(evaluation(99, 1))
    plane._emit(evaluation(100, 0))
    assert len(sink.calls) == 2  # the rest waits for the end of the poll
    plane._deliver_alerts()
    assert sink.calls[-1] == ["99-0"]
    plane._deliver_alerts()
    assert len(sink.calls) == 3  # nothing new: no empty hand-over
    delivered = [key for call in sink.calls for key in call]
    assert len(delivered) == len(set(delivered)) == 2 * ALERTS_PER_DELIVERY + 1
    assert plane.counters_.alerts == 2 * ALERTS_PER_DELIVERY + 1


def test_committing_hands_over_alerts_a_failed_poll_left_behind() -> None:
    plane, sink = plane_with_sink()
    plane._emit(evaluation(1, 1))
    assert sink.calls == []
    plane._flush_and_commit()  # no partitions assigned: nothing to commit, alerts handed over
    assert sink.calls == [["1-0"]]


class ListStore:
    """A `Store` that keeps inserted rows in a list (reads are not needed here)."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def query(
        self, sql: str, parameters: dict[str, Any] | None = None, readonly: bool = False
    ) -> QueryResult:
        return QueryResult([], [], [])

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        self.rows += rows

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]:
        self.insert(table, rows, column_names)
        return []


def test_every_configured_alert_sink_gets_the_same_group() -> None:
    config = RealtimeConfig(
        bootstrap_servers="127.0.0.1:1", alerts_topic=None, sampled_topic=None, turns_topic=None
    )
    store: Store = ListStore()
    plane = RealtimePlane(config, alert_store=AlertRecords(store))
    webhook = RecordingSink()
    assert plane.sinks[1:] == [plane.store_sink]
    assert [type(sink) for sink in plane.sinks] == [LogAlertSink, StoreAlertSink]
    plane.webhook = webhook  # type: ignore[assignment]
    plane.sinks.append(webhook)
    plane._emit(evaluation(1, 2))
    plane._deliver_alerts()
    assert webhook.calls == [["1-0", "1-1"]]
    assert plane.store_sink is not None
    plane.store_sink.flush()
    assert len(store.rows) == 2  # type: ignore[attr-defined]


def test_alerts_are_numbered_per_partition_in_the_order_found() -> None:
    plane, sink = plane_with_sink()
    plane._emit(evaluation(1, 2, partition=0))
    plane._emit(evaluation(2, 1, partition=3))
    plane._emit(evaluation(3, 1, partition=0))
    plane._deliver_alerts()
    assert sink.numbers == [(0, 1), (0, 2), (3, 1), (0, 3)]


class Records(logging.Handler):
    """Keeps the alert log records it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen: list[Any] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append(record)


class RecordingProducer:
    """Stands in for the plane's Kafka producer: records each `send`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []

    def send(self, topic: str, value: bytes, key: bytes) -> None:
        self.sent.append((topic, value, key))


def test_the_log_line_and_the_alerts_topic_are_sinks_of_the_same_group() -> None:
    config = RealtimeConfig(bootstrap_servers="127.0.0.1:1", sampled_topic=None, turns_topic=None)
    plane = RealtimePlane(config)
    assert [type(sink) for sink in plane.sinks] == [LogAlertSink, TopicAlertSink]
    plane._emit(evaluation(7, 2))
    plane._deliver_alerts()  # not connected: the topic sink has no producer, sends nothing
    producer = RecordingProducer()
    plane.producer = producer  # type: ignore[assignment]
    records, logger = Records(), logging.getLogger(ALERT_LOGGER)
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    try:
        plane._emit(evaluation(8, 2))
        plane._deliver_alerts()
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    assert [record.alert.alert_key for record in records.seen] == ["8-0", "8-1"]
    trace_id = f"{8:032x}"
    assert [(topic, key) for topic, _, key in producer.sent] == [
        (config.alerts_topic, trace_id.encode())
    ] * 2
    assert [Alert.model_validate_json(value).alert_key for _, value, _ in producer.sent] == [
        "8-0",
        "8-1",
    ]


class QuietConsumer:
    """Stands in for the Kafka consumer of an idle topic: records each poll's wait."""

    def __init__(self) -> None:
        self.waits: list[int] = []

    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        self.waits.append(timeout_ms)
        return {}

    def commit(self, next_offsets: dict[Any, int]) -> None:
        pass

    def partition(self, number: int) -> int:
        return number


def test_a_poll_waits_until_the_first_held_trace_falls_due_within_its_bounds() -> None:
    now = [100.0]
    plane, _ = plane_with_sink(clock=lambda: now[0])
    consumer = QuietConsumer()
    plane.consumer = consumer  # type: ignore[assignment]
    plane.poll_once()  # nothing held
    span = Span("t", "ab" * 16, "00000000000000aa", "", "invoke_agent", "Internal", 1, 2)
    plane.assembler.add(0, 0, [span], now[0])  # falls due after the quiet window, 1 s
    plane.poll_once()
    now[0] += 0.7
    plane.poll_once()
    now[0] += 0.29  # 10 ms before it falls due
    plane.poll_once()
    configured = plane.config.poll_timeout_ms
    assert consumer.waits == [IDLE_POLL_MS, IDLE_POLL_MS, 300, configured]
    assert plane.assembler.traces_held == 1
    now[0] += 0.05
    plane.poll_once()
    assert plane.assembler.traces_held == 0  # evaluated once due
    assert consumer.waits[-1] == configured
