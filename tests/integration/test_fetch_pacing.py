"""A consumer's fetch pace (`transport.consumer.TopicConsumer`, `idle_fetch_wait_ms`) on the
real broker: the busy wait while records flow, the idle one after a quiet spell, the busy
one again with the next record, which the held idle fetch delivers."""

from __future__ import annotations

from kafka import KafkaProducer
from pathgrade.schemas.topics import SPANS_TOPIC
from pathgrade.transport.consumer import TopicConsumer
from pathgrade.transport.kafka_settings import kafka_client_settings

from pathgrade.stack.broker import LocalBroker, ensure_topics
from tests.integration.conftest import wait_until


def test_an_idle_consumer_fetches_at_the_idle_pace_and_a_record_brings_the_busy_one_back(
    broker: LocalBroker,
) -> None:
    ensure_topics(broker.bootstrap)
    consumer = TopicConsumer(
        broker.bootstrap, "pacing", SPANS_TOPIC, fetch_max_wait_ms=100,
        idle_fetch_wait_ms=700, quiet_before_idle_s=0.5,
    )  # fmt: skip
    producer = KafkaProducer(**kafka_client_settings(broker.bootstrap))
    try:
        producer.send(SPANS_TOPIC, b"first").get(timeout=30)
        # polled back to back (interval 0): a member that stops polling mid-join never joins
        read = wait_until(lambda: consumer.poll(timeout_ms=500), interval_s=0)
        assert consumer.fetch_wait_ms() == 100  # just read: busy
        wait_until(
            lambda: not consumer.poll(timeout_ms=100) and consumer.fetch_wait_ms() == 700,
            interval_s=0,
        )
        producer.send(SPANS_TOPIC, b"second").get(timeout=30)
        again = wait_until(lambda: consumer.poll(timeout_ms=500), interval_s=0)
        assert consumer.fetch_wait_ms() == 100
        values = [m.value for messages in (*read.values(), *again.values()) for m in messages]
        assert values == [b"first", b"second"]
    finally:
        producer.close()
        consumer.close()
