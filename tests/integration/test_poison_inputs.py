"""Poison inputs on the real stack (issue 15): a span too large for Kafka in total is refused
before it is acknowledged and never blocks later spans; values no conversion foresaw
cost a typed column, never the spans around them; a spill entry Kafka refuses is moved to
the dead-letter file, counted, and the rest drains, across a restart. Each test counts
what was acknowledged against what the store holds, with and without FINAL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, TracesData
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.spill import OutgoingMessage, SpillFile
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker, ensure_topics
from pathgrade.stack.store_access import StatusUnavailable, stack_status
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.test_ingest import post
from tests.support.forwarded import as_published

pytestmark = pytest.mark.integration

KIB = 1024
MIB = 1024 * KIB
NOW_NS = 1_760_000_000 * 10**9


class Stack:
    """A `pathgrade up` on default (privacy) settings and the broker it uses."""

    def __init__(self, process: PathgradeProcess, http_port: int, grpc_port: int, data_dir: Path):
        self.process = process
        self.http_url = f"http://127.0.0.1:{http_port}/v1/traces"
        self.grpc_endpoint = f"127.0.0.1:{grpc_port}"
        self.data_dir = data_dir

    def stored(self, trace_ids: list[str]) -> tuple[int, int, int]:
        """(rows after FINAL, distinct spans, rows without FINAL) of these traces."""
        ids = ",".join(f"'{t}'" for t in trace_ids)
        final = self.process.sql(
            f"SELECT count(), uniqExact(TraceId, SpanId) FROM spans FINAL WHERE TraceId IN ({ids})"
        ).rows[0]
        raw = self.process.scalar(f"SELECT count() FROM spans WHERE TraceId IN ({ids})")
        return final[0], final[1], raw

    def wait_stored(self, trace_ids: list[str], spans: int) -> None:
        """Every acknowledged span stored once after FINAL; duplicates before the merge
        allowed (at-least-once), never fewer."""

        def stored_as_acknowledged() -> bool:
            final, distinct, raw = self.stored(trace_ids)
            return final == distinct == spans and raw >= spans

        wait_until(stored_as_acknowledged, timeout_s=90)

    def counters(self) -> dict[str, Any]:
        """The latest status snapshot (waiting for the first one)."""

        def snapshot() -> dict[str, Any] | None:
            try:
                return stack_status(self.data_dir)["snapshot"]
            except StatusUnavailable:
                return None

        return wait_until(snapshot, timeout_s=30)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    local = LocalBroker(log_path=tmp_path_factory.mktemp("broker") / "broker.log")
    local.start()
    ensure_topics(local.bootstrap)
    yield local
    local.stop()


@pytest.fixture(scope="module")
def stack(broker: LocalBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("poison")
    process, grpc_port, http_port = start_stack(
        data_dir, "--kafka", broker.bootstrap, "--status-every", "1"
    )
    yield Stack(process, http_port, grpc_port, data_dir)
    assert process.terminate() == 0, process.output


def key_value(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def text(value: str) -> AnyValue:
    return AnyValue(string_value=value)


def strings_in_kvlists(parts: int, size: int) -> AnyValue:
    """An array of `parts` key-value lists, each holding one string of `size` bytes: every
    string is under the 1 MiB value limit, together they are not."""
    value = AnyValue()
    for i in range(parts):
        pair = value.array_value.values.add().kvlist_value.values.add()
        pair.key, pair.value.string_value = f"part{i}", chr(ord("a") + i % 26) * size
    return value


def span(trace: int, number: int, parent: int | None = None, **attributes: AnyValue) -> Span:
    proto = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=number.to_bytes(8, "big"),
        parent_span_id=b"" if parent is None else parent.to_bytes(8, "big"),
        name="chat gpt-4o" if parent is not None else "invoke_agent Support",
        start_time_unix_nano=NOW_NS + number,
        end_time_unix_nano=NOW_NS + number + 1_000,
    )
    proto.attributes.extend(key_value(k.replace("__", "."), v) for k, v in attributes.items())
    return proto


def resource_spans(service: str, spans: list[Span], **attributes: AnyValue) -> ResourceSpans:
    resource = ResourceSpans()
    resource.resource.attributes.append(key_value("service.name", text(service)))
    resource.resource.attributes.extend(key_value(k, v) for k, v in attributes.items())
    resource.scope_spans.add().spans.extend(spans)
    return resource


def export(url: str, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
    status, body = post(url, request.SerializeToString(), "application/x-protobuf")
    assert status == 200, body[:500]
    return ExportTraceServiceResponse.FromString(body)


def test_span_too_large_for_kafka_in_total_is_refused_and_later_spans_are_stored(
    stack: Stack,
) -> None:
    """The reported case: 20 strings of 900 KiB (each under the 1 MiB value limit) nested in
    one span add up past what Kafka takes. Also a span between the message limit and the
    producer's, inside an event, and a resource too large for any message. The keys are
    allowed ones (`pathgrade.*`): a value whose key is not allowed travels as its short mark,
    which any message holds."""
    trace = 0x15A
    oversized = span(trace, 3, 1, pathgrade__chunks=strings_in_kvlists(20, 900 * KIB))
    in_event = span(trace, 4, 1)
    in_event.events.add(time_unix_nano=NOW_NS, name="chunked").attributes.append(
        key_value("pathgrade.chunks", strings_in_kvlists(4, 300 * KIB))
    )
    request = ExportTraceServiceRequest(
        resource_spans=[
            resource_spans("poison", [span(trace, 1), span(trace, 2, 1), oversized, in_event]),
            resource_spans(
                "big-resource", [span(trace, 5, 1), span(trace, 6, 1)],
                **{"pathgrade.labels": strings_in_kvlists(4, 300 * KIB)},
            ),
        ]
    )  # fmt: skip
    assert request.ByteSize() > 16 * MIB  # past the producer's max_request_size too

    response = export(stack.http_url, request)

    rejected = response.partial_success
    assert rejected.rejected_spans == 4
    trace_hex = f"{trace:032x}"
    for number in (3, 4, 5, 6):
        assert f"span {trace_hex}/{number:016x} " in rejected.error_message
    assert rejected.error_message.count("exceeds the per-span limit of 921600 bytes") == 4
    stack.wait_stored([trace_hex], 2)  # the good spans of the same request and trace

    later_http = send_demo_traces(HttpSpanExporter(endpoint=stack.http_url), traces=10, seed=3)
    later_grpc = send_demo_traces(
        GrpcSpanExporter(endpoint=stack.grpc_endpoint, insecure=True), traces=10, seed=4
    )
    stack.wait_stored(later_http.trace_ids + later_grpc.trace_ids,
                      later_http.spans + later_grpc.spans)  # fmt: skip
    collector = stack.counters()["collector"]
    assert collector["spill_bytes"] == 0 and collector["dead_letter_messages"] == 0
    assert stack.stored([trace_hex])[2] == 2  # the refused spans were never acknowledged


def consumer_spans(stack: Stack, expected: tuple[int, int] | None = None) -> tuple[int, int]:
    """(spans decoded by the realtime plane, spans stored) from a snapshot taken after this
    call, once both consumers read the same (or, given, `expected`)."""
    asked_at = time.time()

    def counts() -> tuple[int, int] | None:
        snapshot = stack.counters()
        realtime = sum(w["spans"] for w in snapshot["realtime"])
        found = (realtime, snapshot["store_writer"]["spans"])
        fresh = snapshot["taken_at"] > asked_at
        return found if fresh and found == (expected or (realtime, realtime)) else None

    return wait_until(counts, timeout_s=60)


def test_values_no_conversion_foresaw_cost_a_field_never_the_spans_around_them(
    stack: Stack, broker: LocalBroker
) -> None:
    """Superscript digits pass str.isdigit() and made int() raise, which dropped every span
    of the trace message in the store writer and the realtime plane. Through the collector
    (privacy on: message content is dropped there) and from a foreign producer straight
    into Kafka (an OTel Collector's Kafka exporter redacts nothing), with a receive-time
    header that is no number."""
    realtime_before, stored_before = consumer_spans(stack)
    collector_trace, kafka_trace = f"{0x5E1:032x}", f"{0x5E2:032x}"
    through_collector = ExportTraceServiceRequest(resource_spans=[resource_spans("sup", [
        span(0x5E1, 1, pathgrade__replay__index=text("²")),
        span(0x5E1, 2, 1, gen_ai__operation__name=text("chat"),
             gen_ai__usage__input_tokens=text("²"), gen_ai__usage__output_tokens=text("7")),
        span(0x5E1, 3, 1, gen_ai__usage__input_tokens=text("1" * 5000)),
    ])])  # fmt: skip
    assert export(stack.http_url, through_collector).partial_success.rejected_spans == 0

    foreign = TracesData(resource_spans=[resource_spans("foreign", [
        span(0x5E2, 1),
        span(0x5E2, 2, 1, gen_ai__operation__name=text("chat"),
             **{"gen_ai.prompt.².content": text("x"), "gen_ai.prompt.0.content": text("hi"),
                "gen_ai.prompt.0.tool_calls.².name": text("search"),
                "llm.input_messages.١.message.role": text("user")}),
    ])])  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    headers = [(TENANT_HEADER, b"default"), (RECEIVED_AT_HEADER, "²".encode())]
    producer.send(SPANS_TOPIC, foreign.SerializeToString(), kafka_trace.encode(), headers)
    producer.flush(timeout=30)
    producer.close()

    stack.wait_stored([collector_trace], 3)
    stack.wait_stored([kafka_trace], 2)
    consumer_spans(stack, (realtime_before + 5, stored_before + 5))  # every span read by both
    row = stack.process.sql(
        f"SELECT GenAIInputTokens, GenAIOutputTokens, SpanAttributes['gen_ai.usage.input_tokens']"
        f" FROM spans FINAL WHERE TraceId = '{collector_trace}' AND SpanId = '{2:016x}'"
    ).rows[0]
    assert list(row) == [None, 7, "²"]  # the typed column is empty, the value kept as text
    replay = stack.process.scalar(
        f"SELECT EvalReplayIndex FROM spans FINAL WHERE TraceId = '{collector_trace}' "
        f"AND SpanId = '{1:016x}'"
    )
    assert replay is None
    messages = stack.process.scalar(
        f"SELECT GenAIInputMessages FROM spans FINAL WHERE TraceId = '{kafka_trace}' "
        f"AND SpanId = '{2:016x}'"
    )
    assert json.loads(messages) == [{"role": "", "parts": [{"type": "text", "content": "hi"}]}]
    snapshot = stack.counters()
    assert snapshot["store_writer"]["undecodable_messages"] == 0
    assert snapshot["store_writer"]["unreadable_headers"] == 1
    assert snapshot["store_writer"]["partly_decoded_spans"] == 0
    assert all(w["undecodable_messages"] == 0 for w in snapshot["realtime"])


def seeded_spill(directory: Path) -> tuple[list[str], int]:
    """A spill as an earlier collector left it (the state the issue reports): good trace
    messages, one message past the producer's 16 MiB request size, a frame that is no
    message, more good messages. Returns the good traces and their span count."""
    good_before = ExportTraceServiceRequest(resource_spans=[resource_spans(
        "seeded", [span(0xD1, 1), span(0xD1, 2, 1), span(0xD2, 1)])])  # fmt: skip
    good_after = ExportTraceServiceRequest(resource_spans=[resource_spans(
        "seeded", [span(0xD3, 1), span(0xD3, 2, 1)])])  # fmt: skip
    huge = TracesData(resource_spans=[resource_spans(
        "seeded", [span(0xD4, 1, app__blob=text("z" * (17 * MIB)))])])  # fmt: skip

    received = time.time_ns()  # the store keeps rows 90 days from their arrival

    def messages(request: ExportTraceServiceRequest) -> list[OutgoingMessage]:
        return [OutgoingMessage(m.key, m.value, "default", received)
                for m in group_by_trace(as_published(request)).messages]  # fmt: skip

    spill = SpillFile(directory)
    spill.append(messages(good_before))
    spill.append([OutgoingMessage(f"{0xD4:032x}".encode(), huge.SerializeToString(),
                                  "default", received)])  # fmt: skip
    [segment] = spill.paths()
    spill.close()
    not_a_message = b"\x00\x20\x00\x04" + bytes(8) + b"k" * 32 + b"\xff\xfe\xfd\xfc"
    with open(segment, "ab") as data:
        data.write(len(not_a_message).to_bytes(4, "big") + not_a_message)
    spill = SpillFile(directory)
    spill.append(messages(good_after))
    spill.close()
    return [f"{t:032x}" for t in (0xD1, 0xD2, 0xD3)], 5


def test_spill_entry_kafka_refuses_is_dead_lettered_and_the_rest_drains_across_restarts(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "stack"
    good_traces, good_spans = seeded_spill(data_dir / "spill")

    first = Stack(*_started(data_dir), data_dir)
    try:
        first.wait_stored(good_traces, good_spans)
        collector = wait_until(lambda: first.counters()["collector"], timeout_s=30)
        assert collector["dead_letter_messages"] == 2 and collector["spill_bytes"] == 0
        wait_until(lambda: first.process.output_has("2 dead-lettered (pathgrade dead-letter)"))
        metrics = first.process.owner().get("/metrics").decode()
        assert "pathgrade_collector_dead_letter_messages 2" in metrics
        later = send_demo_traces(HttpSpanExporter(endpoint=first.http_url), traces=5, seed=8)
        first.wait_stored(later.trace_ids, later.spans)

        listing = PathgradeProcess(["dead-letter", "--data-dir", str(data_dir), "--format",
                                    "json"], ready_text="reason")  # fmt: skip
        assert listing.process.wait(timeout=60) == 0
        entries = json.loads(listing.output)
        assert [e["trace_id"] for e in entries] == [f"{0xD4:032x}", ""]
        assert "MessageSizeTooLargeError" in entries[0]["reason"]
        assert entries[1]["reason"].startswith("unreadable spill frame")
    finally:
        assert first.process.terminate() == 0, first.process.output

    second = Stack(*_started(data_dir), data_dir)
    try:  # the dead letters are still counted; nothing is retried; what was stored stays
        collector = wait_until(lambda: second.counters()["collector"], timeout_s=30)
        assert collector["dead_letter_messages"] == 2 and collector["spill_bytes"] == 0
        second.wait_stored(good_traces + later.trace_ids, good_spans + later.spans)
        assert second.stored([f"{0xD4:032x}"]) == (0, 0, 0)
    finally:
        assert second.process.terminate() == 0, second.process.output


def _started(data_dir: Path) -> tuple[PathgradeProcess, int, int]:
    process, grpc_port, http_port = start_stack(data_dir, "--status-every", "1")
    return process, http_port, grpc_port
