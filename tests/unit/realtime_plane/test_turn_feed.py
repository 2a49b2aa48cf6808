"""`TurnFeed` against a stand-in Kafka client and clock: it waits for the turns topic
(polling every 0.2 s, 10 s at most, then stops naming the topic and the ways out), reads
every partition from `lookback_s` back by timestamp (a partition with nothing that recent
from its end), polls without waiting, and closes its client once. The real broker's run is
tests/integration/test_realtime_shared_history.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from kafka import TopicPartition
from pathgrade.realtime_plane import turns
from pathgrade.realtime_plane.turns import TurnFeed
from pathgrade.schemas.topics import TURNS_TOPIC

WAIT_S = 10.0  # docs/realtime.md: the plane waits 10 s for the topic
WALL_S = 1_700_000_000.0


class Clock:
    """`time` for the feed: a sleep takes `sleep_takes` seconds whatever was asked (a
    loaded machine), so a test lands on the deadline exactly or steps over it."""

    def __init__(self, sleep_takes: float) -> None:
        self.now = 0.0
        self.sleep_takes = sleep_takes
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return WALL_S + self.now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.sleeps.append(seconds)
        self.now += self.sleep_takes


class Client:
    """A KafkaConsumer whose topic has partitions 2, 0, 1 from its `appears_at`-th look
    on (never: None), with offsets at `since_ms` for partitions 0 (7) and 2 (12)."""

    made: ClassVar[list[Client]] = []
    appears_at: int | None = 0

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.looks = 0
        self.assigned: list[TopicPartition] = []
        self.asked: dict[TopicPartition, int] = {}
        self.seeks: dict[TopicPartition, int] = {}
        self.at_end: list[TopicPartition] = []
        self.timeouts: list[int] = []
        self.closed = 0
        Client.made.append(self)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        assert topic == TURNS_TOPIC and self.looks < 100, "still looking for the topic"
        self.looks += 1
        if self.appears_at is None or self.looks <= self.appears_at:
            return None
        return {2, 0, 1}

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned = partitions

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict:
        self.asked = times
        found = {0: 7, 2: 12}
        return {tp: SimpleNamespace(offset=found[tp.partition]) if tp.partition in found
                else None for tp in times}  # fmt: skip

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks[tp] = offset

    def seek_to_end(self, tp: TopicPartition) -> None:
        self.at_end.append(tp)

    def poll(self, timeout_ms: int) -> dict:
        self.timeouts.append(timeout_ms)
        return {}

    def close(self) -> None:
        self.closed += 1


def started(
    monkeypatch: pytest.MonkeyPatch, appears_at: int | None, sleep_takes: float = 2.5
) -> tuple[TurnFeed, Clock]:
    """A feed of worker w2 reading 600 s back, started with the stand-ins."""
    clock = Clock(sleep_takes)
    monkeypatch.setattr(turns, "time", clock)
    monkeypatch.setattr(turns, "KafkaConsumer", Client)
    monkeypatch.setattr(Client, "made", [])
    monkeypatch.setattr(Client, "appears_at", appears_at)
    feed = TurnFeed("k:9092", TURNS_TOPIC, "w2", 600.0)
    feed.start()
    return feed, clock


def tp(partition: int) -> TopicPartition:
    return TopicPartition(TURNS_TOPIC, partition)


def test_a_started_feed_reads_every_partition_from_the_lookback_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed, clock = started(monkeypatch, appears_at=0)
    (client,) = Client.made
    assert feed.consumer is client and clock.sleeps == []
    assert client.settings["group_id"] is None  # no group: every partition, no commits
    assert client.settings["enable_auto_commit"] is False
    assert client.assigned == [tp(0), tp(1), tp(2)]
    since_ms = int((WALL_S - 600.0) * 1000)
    assert client.asked == {tp(0): since_ms, tp(1): since_ms, tp(2): since_ms}
    assert client.seeks == {tp(0): 7, tp(2): 12}
    assert client.at_end == [tp(1)]  # nothing that recent: from its end


def test_the_feed_waits_for_the_topic_polling_every_fifth_of_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed, clock = started(monkeypatch, appears_at=4)  # found at 10 s, its last look
    (client,) = Client.made
    assert feed.consumer is client and client.assigned == [tp(0), tp(1), tp(2)]
    assert client.looks == 5 and clock.sleeps == [0.2] * 4 and clock.now == WAIT_S


@pytest.mark.parametrize(
    ("sleep_takes", "looks", "gave_up_at"),
    [(2.5, 5, 10.0), (3.0, 5, 12.0), (4.0, 4, 12.0), (0.5, 21, 10.0)],
)
def test_a_topic_that_does_not_come_stops_the_feed_after_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, sleep_takes: float, looks: int, gave_up_at: float
) -> None:
    with pytest.raises(RuntimeError) as stopped:
        started(monkeypatch, appears_at=None, sleep_takes=sleep_takes)
    (client,) = Client.made
    assert (client.looks, turns.time.now) == (looks, gave_up_at)  # type: ignore[attr-defined]
    assert gave_up_at >= WAIT_S > gave_up_at - sleep_takes
    assert client.closed == 1
    message = str(stopped.value)
    assert f"Kafka topic {TURNS_TOPIC} does not exist" in message
    assert "`pathgrade topics --kafka k:9092`" in message and "--no-shared-history" in message


def test_polling_does_not_wait_and_close_closes_the_client_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed, _ = started(monkeypatch, appears_at=0)
    (client,) = Client.made
    assert feed.poll(SimpleNamespace(forged_messages=0)) == []  # type: ignore[arg-type]
    assert client.timeouts == [0]
    feed.close()
    feed.close()
    assert client.closed == 1 and feed.consumer is None
    assert feed.poll(SimpleNamespace(forged_messages=0)) == []  # type: ignore[arg-type]
    assert client.timeouts == [0]
    TurnFeed("k:9092", TURNS_TOPIC, "w2", 600.0).close()  # never started: nothing to close
