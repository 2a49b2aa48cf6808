"""Two realtime consumers in one group on the real broker share conversation turns through
`pathgrade.turns`: a reset confirmed on turn 1 (read by one consumer) and executed on turn 2
(read by the other) does not alert PG111; without the shared topic it does. Turn 2 also
carries a failed lookup (PG101 in both cases), so its alerts are seen to arrive and the
missing PG111 means something."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import set_span_in_context
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.schemas.topics import SPANS_TOPIC, TURNS_TOPIC

from pathgrade.stack.broker import DEFAULT_PARTITIONS, LocalBroker
from tests.integration import test_realtime
from tests.integration.conftest import wait_until
from tests.integration.test_realtime import Webhook, codes_by_trace

pytestmark = pytest.mark.integration

webhook = test_realtime.webhook  # the fixture: a webhook receiver keeping each alert

CONVERSATION = "conv-shared-1"
RESET_ARGUMENTS = {"customer_id": "C-1001", "device": "router"}


def turn_spans(confirm: bool, execute: bool, start_ns: int) -> list[ReadableSpan]:
    """One turn of CONVERSATION through the OTel SDK: the user's confirmation of a router
    reset on its root span (`confirm`) and/or the irreversible reset itself and a lookup
    that timed out (`execute`)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("support-agent")
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "support",
        "gen_ai.conversation.id": CONVERSATION,
        "pathgrade.turn.kind": "action",
    }
    if confirm:
        attributes["pathgrade.confirmed_action"] = json.dumps(
            {"name": "reset_equipment", "arguments": RESET_ARGUMENTS}
        )
    root = tracer.start_span("invoke_agent support", context=Context(), attributes=attributes,
                             start_time=start_ns)  # fmt: skip
    if execute:
        tool = tracer.start_span(
            "execute_tool reset_equipment", context=set_span_in_context(root),
            attributes={"gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "reset_equipment", "gen_ai.tool.call.id": "call-1",
                        "gen_ai.tool.call.arguments": json.dumps(RESET_ARGUMENTS),
                        "pathgrade.tool.effect": "irreversible"},
            start_time=start_ns + 1_000_000,
        )  # fmt: skip
        tool.end(end_time=start_ns + 2_000_000)
        lookup = tracer.start_span(
            "execute_tool lookup_order", context=set_span_in_context(root),
            attributes={"gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "lookup_order", "gen_ai.tool.call.id": "call-2",
                        "error.type": "timeout"},
            start_time=start_ns + 2_100_000,
        )  # fmt: skip
        lookup.end(end_time=start_ns + 2_200_000)
    root.end(end_time=start_ns + 3_000_000)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def send(producer: KafkaProducer, spans: list[ReadableSpan], partition: int) -> str:
    """Publish one turn as the collector would (one message, keyed by trace id) to the
    given partition; returns its trace id."""
    trace_id = f"{spans[0].context.trace_id:032x}"
    producer.send(SPANS_TOPIC, encode_spans(spans).SerializeToString(), trace_id.encode(),
                  partition=partition)  # fmt: skip
    producer.flush()
    return trace_id


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-consumer"])
def test_a_confirmation_read_by_one_consumer_reaches_the_next_turn_on_the_other(
    broker: LocalBroker, webhook: Webhook, shared: bool
) -> None:
    config = RealtimeConfig(
        bootstrap_servers=broker.bootstrap, webhook_url=webhook.url,
        turns_topic=TURNS_TOPIC if shared else None,
    )  # fmt: skip
    planes = [RealtimePlane(config), RealtimePlane(config)]
    for plane in planes:
        plane.start()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        wait_until(
            lambda: (
                all(p.assigned for p in planes)
                and sorted(n for p in planes for n in p.assigned) == list(range(DEFAULT_PARTITIONS))
            ),
            timeout_s=45,
        )
        first, second = planes
        now = time.time_ns()
        send(producer, turn_spans(True, False, now - 10**9), min(first.assigned))
        wait_until(lambda: first.counters()["traces_evaluated"] == 1, timeout_s=30)
        if shared:
            wait_until(lambda: second.counters()["turns_received"] == 1, timeout_s=30)
        turn_2 = send(producer, turn_spans(False, True, now), min(second.assigned))
        wait_until(lambda: second.counters()["traces_evaluated"] == 1, timeout_s=30)
    finally:
        producer.close()
        for plane in planes:
            plane.stop()  # delivers the queued webhooks
    codes = codes_by_trace(webhook.alerts)
    assert "PG101" in codes.get(turn_2, set()), codes  # turn 2's alerts were delivered
    assert ("PG111" in codes[turn_2]) is not shared, codes
    # every alert the two raised reached the webhook, once
    assert len(webhook.alerts) == sum(p.counters()["alerts"] for p in planes), webhook.alerts
    assert [p.counters()["turns_shared"] for p in planes] == [int(shared)] * 2
    assert second.counters()["turns_received"] == int(shared)  # not its own turn 2 back


def test_a_missing_turns_topic_is_a_clear_error(tmp_path: Path) -> None:
    broker = LocalBroker(log_path=tmp_path / "broker.log")
    broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(SPANS_TOPIC, DEFAULT_PARTITIONS, 1)])
        admin.close()
        realtime = subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", "realtime", "--kafka", broker.bootstrap,
             "--data-dir", str(tmp_path / "store")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        broker.stop()
    assert realtime.returncode == 2, realtime.stderr
    assert f"Kafka topic {TURNS_TOPIC} does not exist" in realtime.stderr
    assert "--no-shared-history" in realtime.stderr


def test_more_realtime_processes_than_partitions_is_refused(tmp_path: Path) -> None:
    up = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "up", "--data-dir", str(tmp_path),
         "--grpc-port", "0", "--http-port", "0",
         "--realtime-workers", str(DEFAULT_PARTITIONS + 1)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert up.returncode == 2, up.stdout + up.stderr
    assert f"{SPANS_TOPIC} has {DEFAULT_PARTITIONS} partitions" in up.stderr
