"""Every export is answered, whatever the broker does (issue 15, alerts and
acknowledgements): a request stops waiting for Kafka after `ack_timeout_s` (plus at most one
blocked send) and spills instead. The official exporters are the judge, with a timeout
(EXPORT_TIMEOUT_S) shorter than the broker's stall: a collector that waited on the broker
would fail every export it held; one that spills answers in `ack_timeout_s` (5 s), under
their default 10 s on a quiet machine (the slowest answer is printed), and within the
longer timeout on a loaded one. Nothing the collector acknowledged is lost once the broker
is back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.demo.sender import DemoSummary, send_demo_traces
from pathgrade.stack.broker import LocalBroker, ensure_topics
from tests.integration.conftest import spill_on_disk, start_collector, start_stack, wait_until
from tests.integration.test_poison_inputs import Stack
from tests.support.topics import read_topic

pytestmark = pytest.mark.integration

EXPORT_TIMEOUT_S = 30.0  # the exporters' (default 10 s): room for a loaded machine
STALL_S = 40.0  # longer than EXPORT_TIMEOUT_S: waiting on the broker fails the exports


class TimedExporter(SpanExporter):
    """The official exporter, with each export's duration and result kept (for the report;
    the exporter's own timeout is what fails a late answer)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exports: list[tuple[float, SpanExportResult, int]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        started = time.monotonic()
        result = self.inner.export(spans)
        self.exports.append((time.monotonic() - started, result, len(spans)))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def sending(
    exporter: SpanExporter, traces: int, seed: int, out: list[DemoSummary]
) -> threading.Thread:
    """A sender thread at about 40 traces (some 200 spans) per second; raises in the thread
    (and leaves `out` empty) when an export failed."""
    thread = threading.Thread(
        target=lambda: out.append(send_demo_traces(exporter, traces, seed, rate_per_s=40)),
        daemon=True,
    )
    thread.start()
    return thread


def test_broker_stalled_under_load_every_export_answered_in_time_nothing_lost(
    broker: LocalBroker, tmp_path: Path
) -> None:
    process, grpc_port, http_port = start_stack(
        tmp_path / "stack", "--kafka", broker.bootstrap, "--status-every", "1"
    )
    stack = Stack(process, http_port, grpc_port, tmp_path / "stack")
    http = TimedExporter(HttpSpanExporter(endpoint=stack.http_url, timeout=EXPORT_TIMEOUT_S))
    grpc = TimedExporter(
        GrpcSpanExporter(endpoint=stack.grpc_endpoint, insecure=True, timeout=EXPORT_TIMEOUT_S)
    )
    summaries: list[DemoSummary] = []
    try:
        senders = [sending(http, 1_400, 21, summaries), sending(grpc, 1_400, 22, summaries)]
        time.sleep(5)
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGSTOP)  # the broker stops answering anything
        spilled = []
        try:
            deadline = time.monotonic() + STALL_S
            while time.monotonic() < deadline:
                spilled.append(stack.counters()["collector"]["spill_bytes"])
                time.sleep(1)
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        for sender in senders:
            sender.join(timeout=300)
        assert len(summaries) == 2, "an export failed (late answer or error); see the log"
        assert max(spilled) > 0  # the stall did hold requests up: they were spilled
        exports = http.exports + grpc.exports
        assert all(result is SpanExportResult.SUCCESS for _, result, _ in exports)
        acknowledged = sum(spans for _, _, spans in exports)
        assert acknowledged == sum(s.spans for s in summaries)
        print(
            f"{len(exports)} exports, {acknowledged} spans acknowledged; slowest answer "
            f"{max(d for d, _, _ in exports):.2f} s"
        )
        trace_ids = [t for s in summaries for t in s.trace_ids]
        stack.wait_stored(trace_ids, acknowledged)
        wait_until(lambda: stack.counters()["collector"]["spill_bytes"] == 0)
    finally:
        assert process.terminate() == 0, process.output


def topic_spans(bootstrap: str) -> set[tuple[bytes, bytes]]:
    """(trace id, span id) of every span in the spans topic (read from the start until
    quiet; a span sent twice, at least once as promised, counts once)."""
    spans = set()
    for record in read_topic(bootstrap, SPANS_TOPIC):
        data = TracesData.FromString(record.value)
        spans.update((s.trace_id, s.span_id) for rs in data.resource_spans
                     for ss in rs.scope_spans for s in ss.spans)  # fmt: skip
    return spans


def test_broker_gone_every_export_answered_from_the_spill_and_drained_to_its_successor(
    broker: LocalBroker, tmp_path: Path
) -> None:
    collector, _, http_port = start_collector(broker.bootstrap, tmp_path / "spill")
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    successor = LocalBroker(port=broker.port, log_path=tmp_path / "successor.log")
    try:
        before = send_demo_traces(HttpSpanExporter(endpoint=url), traces=10, seed=31)
        assert broker.process is not None
        broker.process.kill()  # unreachable: connections refused from now on
        broker.process.wait()
        exporter = TimedExporter(HttpSpanExporter(endpoint=url))
        during = send_demo_traces(exporter, traces=60, seed=32)  # raises if an export failed
        assert all(result is SpanExportResult.SUCCESS for _, result, _ in exporter.exports)
        assert spill_on_disk(tmp_path / "spill") > 0

        successor.start()
        ensure_topics(successor.bootstrap)
        # The memory-only broker took `before` with it; what was spilled reaches the new one.
        acknowledged = {bytes.fromhex(t) for t in during.trace_ids}
        wait_until(
            lambda: {t for t, _ in topic_spans(successor.bootstrap)} >= acknowledged,
            timeout_s=120,
        )
        arrived = topic_spans(successor.bootstrap)
        assert len(arrived) == during.spans and {t for t, _ in arrived} == acknowledged
        assert not {bytes.fromhex(t) for t in before.trace_ids} & {t for t, _ in arrived}
    finally:
        assert collector.terminate() == 0, collector.output
        successor.stop()
