"""The online scorer with the stack's message key (a real Tansu broker, a real chDB store):
a sample on `pathgrade.sampled` the stack did not sign is refused, counted and committed
past; one it signed is handled."""

from __future__ import annotations

import threading
import time

import pytest
from kafka import KafkaProducer
from pathgrade.batch_plane.scoring.online import OnlineScorer
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.schemas.sampled import SampledTrace
from pathgrade.schemas.topics import SAMPLED_TOPIC
from pathgrade.transport.message_auth import MessageKey

from pathgrade.stack.broker import LocalBroker
from pathgrade.stack.carry import committed_offsets
from tests.integration.conftest import wait_until
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

pytestmark = pytest.mark.integration


def sample(trace_id: str) -> bytes:
    return SampledTrace(
        trace_id=trace_id, tenant="acme", service="svc", agent="a", risk_tier="low",
        reasons=["base_rate"], conversation_id="", sampled_at_ns=time.time_ns(),
    ).to_json()  # fmt: skip


def test_a_forged_sample_is_refused_counted_and_committed_past(
    broker: LocalBroker, store: ClientStore
) -> None:
    key = MessageKey.generate()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    forged, signed = sample("f0" * 16), sample("5a" * 16)
    headers = key.signed(SAMPLED_TOPIC, b"k", signed, [])
    producer.send(SAMPLED_TOPIC, value=forged, key=b"k", partition=0).get(30)
    producer.send(SAMPLED_TOPIC, value=signed, key=b"k", headers=headers, partition=0).get(30)
    producer.close()
    config = OnlineScorerConfig(
        bootstrap_servers=broker.bootstrap, message_key=key.hex, trace_wait_s=0.2
    )
    scorer = OnlineScorer(config, store)
    stop = threading.Event()
    try:
        # polled back to back, as the scorer's own loop does: kafka-python 3.0 moves a group
        # join on only while a poll is under way, and 250 ms pauses kept it rejoining
        wait_until(
            lambda: scorer.poll_once(stop) or scorer.stats.messages >= 2,
            timeout_s=120,
            interval_s=0,
        )
    finally:
        scorer.close()
    assert (scorer.stats.forged_messages, scorer.stats.skipped) == (1, 1)  # the signed one
    assert committed_offsets(broker.bootstrap, SAMPLED_TOPIC, config.group_id)[0] == 2
