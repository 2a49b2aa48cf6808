"""A partition's next reader remembers what its previous reader alerted, from the alerts
table: a turn read again after a rebalance (its trace was still held when the partition
moved, so its offset was not committed) is evaluated again but raises no alert twice."""

from __future__ import annotations

import time

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.realtime_plane.sinks import NumberedAlert, StoreAlertSink
from pathgrade.schemas.model import Trace
from pathgrade.schemas.topics import SPANS_TOPIC

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

MAX_AGE_S = 10.0
CONFIG = RealtimeConfig(
    bootstrap_servers="127.0.0.1:1", alerts_topic=None, sampled_topic=None, turns_topic=None,
    max_age_s=MAX_AGE_S,
)  # fmt: skip


def alert_keys(plane: RealtimePlane, trace: Trace, partition: int) -> set[str]:
    """The keys of the alerts `plane` raises on `trace`, read from `partition`."""
    evaluation = plane.evaluator.evaluate(DueTurn(trace, "quiet", False, partition), 0)
    return {alert.alert_key for alert in evaluation.new_alerts}


def stored_by_previous_reader(
    store: ClientStore, trace: Trace, partition: int, age_s: float
) -> set[str]:
    """The previous reader of `partition` evaluates `trace` and stores its alerts as found
    `age_s` ago; returns their keys."""
    previous = RealtimePlane(CONFIG, AlertRecords(store))
    evaluation = previous.evaluator.evaluate(
        DueTurn(trace, "quiet", False, partition), time.time_ns() - int(age_s * 1e9)
    )
    sink = StoreAlertSink(AlertRecords(store))
    sink.add([NumberedAlert(partition, n, a) for n, a in enumerate(evaluation.new_alerts, 1)])
    sink.flush()
    return {alert.alert_key for alert in evaluation.new_alerts}


def test_the_next_reader_raises_no_alert_its_previous_reader_stored(
    store: ClientStore, demo: list
) -> None:
    trace = next(t for s, t in demo if s == "plan_change_retry_storm")
    stored = stored_by_previous_reader(store, trace, partition=3, age_s=MAX_AGE_S)
    assert stored
    assert AlertRecords(store).alerted_since({3, 4}, time.time_ns() - int(2 * MAX_AGE_S * 1e9)) == {
        (trace.tenant, trace.trace_id): stored
    }
    records = AlertRecords(store)
    following, elsewhere = RealtimePlane(CONFIG, records), RealtimePlane(CONFIG, records)
    following._assigned({3})
    elsewhere._assigned({4})  # no alert stored for it: nothing to remember
    assert alert_keys(following, trace, 3) == set()
    assert following.evaluator.duplicates_suppressed == len(stored)
    assert alert_keys(elsewhere, trace, 4) == stored


def test_alerts_older_than_two_maximum_ages_are_not_recalled(
    store: ClientStore, demo: list
) -> None:
    """A trace held when its partition moved was first read less than a maximum age
    before; alerts found two maximum ages ago and earlier are of traces not re-read."""
    trace = next(t for s, t in demo if s == "unrequested_billing_ticket")
    stored = stored_by_previous_reader(store, trace, partition=5, age_s=3 * MAX_AGE_S)
    assert stored
    following = RealtimePlane(CONFIG, AlertRecords(store))
    following._assigned({5})
    assert alert_keys(following, trace, 5) == stored
    assert AlertRecords(store).alerted_since({5}, time.time_ns() - int(2 * MAX_AGE_S * 1e9)) == {}
    assert AlertRecords(store).alerted_since({5}, 0) == {(trace.tenant, trace.trace_id): stored}


class RecordingConsumer:
    """Stands in for the plane's Kafka consumer: records each commit."""

    def __init__(self) -> None:
        self.commits: list[dict[tuple[str, int], int]] = []
        self.seeks: list[dict[tuple[str, int], int]] = []

    def partition(self, number: int, topic: str | None = None) -> tuple[str, int]:
        return (topic or SPANS_TOPIC, number)

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> None:
        self.commits.append(dict(next_offsets))

    def seek(self, next_offsets: dict[tuple[str, int], int]) -> None:
        self.seeks.append(dict(next_offsets))


def test_a_revoked_partition_is_committed_up_to_its_held_traces_and_forgotten(demo: list) -> None:
    """Its next owner re-reads the traces still held from the committed offset; the
    partitions kept are neither committed nor forgotten."""
    plane = RealtimePlane(CONFIG)
    consumer = RecordingConsumer()
    plane.consumer = consumer  # type: ignore[assignment]
    plane.assigned = {0, 1}
    (_, moving), (_, staying) = demo[:2]
    plane.assembler.add(0, 5, moving.spans, now=0.0)  # held: its quiet window has not passed
    plane.assembler.add(1, 7, staying.spans, now=0.0)
    plane.revoke({0})
    assert consumer.commits == [{(SPANS_TOPIC, 0): 5}]
    assert plane.assembler.traces_held == 1 and plane.assembler.committable() == {1: 7}
    assert plane.assigned == {1}


def test_a_partition_given_up_and_assigned_again_is_read_again_from_the_commit(
    demo: list,
) -> None:
    """kafka-python keeps its read position when a rebalance hands a partition back to the
    same consumer; what the consumer forgot of it at the revoke lies before that position."""
    plane = RealtimePlane(CONFIG)
    consumer = RecordingConsumer()
    plane.consumer = consumer  # type: ignore[assignment]
    plane.assigned = {0, 1}
    plane.assembler.add(0, 5, demo[0][1].spans, now=0.0)
    plane.revoke({0})
    plane._assigned({0, 2})  # 0 back, 2 new (read from the commit anyway)
    assert consumer.seeks == [{(SPANS_TOPIC, 0): 5}]  # where it committed at the revoke
    plane._assigned({3})
    assert consumer.seeks == [{(SPANS_TOPIC, 0): 5}]  # once
