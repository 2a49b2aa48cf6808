"""Graded traces remembered for late spans: bounded by their spans (and records), the
oldest forgotten first, and kept as the messages their spans came in, which are decoded
again when a late span re-opens the trace so that it is graded as if every span had
come at once."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content.otlp import decode_kafka_message
from pathgrade.detectors import default_policy
from pathgrade.realtime_plane.assembler import DueTurn, TurnAssembler
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, TENANT_HEADER

from pathgrade.demo.sender import send_demo_traces
from tests.unit.realtime_plane.test_assembler_records import record
from tests.unit.realtime_plane.test_realtime_assembler import span, tops


def test_a_trace_with_many_spans_forgets_the_oldest_traces() -> None:
    """recent_spans 5: a (2 spans) and b (2) are remembered; c (3 spans) makes 7, so a,
    the oldest, is forgotten (a span of a read again is new) and b is not (a repeat)."""
    a = TurnAssembler(quiet_window_s=1.0, recent_spans=5)
    a.add(0, 0, [span("a", "r", agent=True), span("a", "x", "r")], now=0.0)
    a.add(0, 1, [span("b", "r", agent=True), span("b", "x", "r")], now=0.0)
    assert tops(a.due(1.0)) == ["r", "r"]
    a.add(0, 2, [span("c", "r", agent=True), span("c", "x", "r"), span("c", "y", "r")], now=2.0)
    assert tops(a.due(3.0)) == ["r"]
    a.add(0, 3, [span("b", "x", "r")], now=4.0)
    assert a.stats.duplicate_spans == 1 and a.traces_held == 0
    a.add(0, 4, [span("a", "x", "r")], now=4.0)
    assert a.stats.duplicate_spans == 1 and a.traces_held == 1


def _two_graded(recent_spans: int) -> TurnAssembler:
    """Trace a (2 spans), then trace b (1 span and 1 log record), graded."""
    a = TurnAssembler(quiet_window_s=1.0, recent_spans=recent_spans)
    a.add(0, 0, [span("a", "r", agent=True), span("a", "x", "r")], now=0.0)
    a.add(0, 1, [span("b", "r", agent=True)], now=0.0)
    a.add_records(0, 0, [record("b", "r")], now=0.0)
    assert tops(a.due(1.0)) == ["r", "r"]
    return a


def test_the_bound_counts_records_and_is_reached_not_passed() -> None:
    """At recent_spans 4, a and b (4 spans and records) are both remembered; at 3, a is
    forgotten (its span read again is new); a trace larger than the bound alone is not
    remembered."""
    a = _two_graded(recent_spans=4)
    a.add(0, 2, [span("a", "x", "r"), span("b", "r", agent=True)], now=2.0)
    assert a.stats.duplicate_spans == 2 and a.traces_held == 0
    big = [span("c", "r", agent=True), *(span("c", f"x{n}", "r") for n in range(4))]
    a.add(0, 3, big, now=3.0)
    assert tops(a.due(4.0)) == ["r"]
    a.add(0, 4, [span("c", "x0", "r")], now=5.0)
    assert a.stats.duplicate_spans == 2 and a.traces_held == 1
    a = _two_graded(recent_spans=3)
    a.add(0, 2, [span("b", "r", agent=True)], now=2.0)
    assert a.stats.duplicate_spans == 1 and a.traces_held == 0
    a.add(0, 3, [span("a", "x", "r")], now=2.0)
    assert a.stats.duplicate_spans == 1 and a.traces_held == 1


@dataclass(frozen=True)
class _Message:
    """A `pathgrade.spans` record as the consumer reads it."""

    value: bytes
    headers: list[tuple[str, bytes]]
    offset: int
    timestamp: int = 0


def _message(spans: list[ReadableSpan], offset: int) -> _Message:
    headers = [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"1700000000000000000")]
    return _Message(encode_spans(spans).SerializeToString(), headers, offset)


class _Keep(InMemorySpanExporter):
    def shutdown(self) -> None:  # keep the spans after the demo shuts the provider down
        pass


@pytest.fixture(scope="module")
def sdk_traces() -> list[list[ReadableSpan]]:
    """The official SDK's spans of 20 demo turns (each production failure once), by trace."""
    exporter = _Keep()
    send_demo_traces(exporter, traces=20, seed=5)
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for sdk_span in exporter.get_finished_spans():
        by_trace[sdk_span.context.trace_id].append(sdk_span)
    return list(by_trace.values())


def _graded(assembler: TurnAssembler, messages: list[_Message], now: float) -> list[DueTurn]:
    for message in messages:
        assembler.add(0, message.offset, decode_kafka_message(message), now, message)
    return assembler.due(now + 1.0)


def test_a_late_span_of_a_remembered_trace_is_graded_as_if_it_came_with_the_others(
    sdk_traces: list[list[ReadableSpan]],
) -> None:
    """Each demo trace's last-started span comes after the rest were graded: the trace is
    re-opened with its other spans decoded again from their message (read once), and
    the turns graded again are those of the whole trace at once, with the same findings."""
    alerted = 0
    for trace in sdk_traces:
        late = max((s for s in trace if s.parent is not None), key=lambda s: s.start_time)
        early = [s for s in trace if s is not late]
        reads: list[object] = []

        def read(message: object, reads: list[object] = reads) -> list:
            reads.append(message)
            return decode_kafka_message(message)

        split = TurnAssembler(quiet_window_s=1.0, expand=read)
        first = _graded(split, [_message(early, 0)], now=0.0)
        again = _graded(split, [_message([late], 1)], now=10.0)
        whole = _graded(TurnAssembler(quiet_window_s=1.0), [_message(trace, 0)], now=0.0)
        assert first and again and reads == [_message(early, 0)]
        assert all(d.re_evaluation for d in again)
        by_top = {d.turn.top_span_id: d.turn for d in whole}
        for due in again:
            expected = by_top[due.turn.top_span_id]
            assert due.turn.spans == expected.spans and due.turn.context == expected.context
        graded = {d.turn.top_span_id: d for d in [*first, *again]}  # the latest grading
        assert graded.keys() == by_top.keys()
        found = _findings(graded.values())
        assert found == _findings(whole)
        alerted += any(found.values())
    assert alerted >= 4  # the production failures' turns, re-graded, find as at once


def _findings(graded: Iterable[DueTurn]) -> dict[str, list[str]]:
    """Per top span, the keys of what the default policy's detectors find in the turn."""
    evaluator = TurnEvaluator(default_policy())
    return {
        d.turn.top_span_id: sorted(f.key for f in evaluator.evaluate(d, now_ns=7).findings)
        for d in graded
    }
