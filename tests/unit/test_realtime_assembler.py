"""TraceAssembler: quiet window, max age, memory bound, late spans, committable offsets."""

from __future__ import annotations

from realtime_plane.assembler import TraceAssembler
from schemas.model import Span


def span(trace: str, span_id: str, parent: str = "", tenant: str = "t") -> Span:
    return Span(tenant, trace * 32, span_id, parent, "s", "Internal", 1, 2)


def test_trace_is_due_after_root_and_quiet_window_only() -> None:
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 10, [span("a", "c1", "r")], now=0.0)
    assert a.due(5.0) == []  # no root yet
    a.add(0, 11, [span("a", "r")], now=5.0)
    assert a.due(5.9) == []
    (due,) = a.due(6.0)
    assert (due.reason, due.incomplete, due.re_evaluation) == ("quiet", False, False)
    assert {s.span_id for s in due.trace.spans} == {"c1", "r"}
    assert a.traces_held == 0 and a.spans_held == 0


def test_old_trace_without_root_is_evaluated_incomplete() -> None:
    a = TraceAssembler(quiet_window_s=1.0, max_age_s=300)
    a.add(0, 0, [span("a", "c1", "r")], now=0.0)
    assert a.due(299.0) == []
    (due,) = a.due(300.0)
    assert due.reason == "max_age" and due.incomplete


def test_memory_bound_evaluates_oldest_early_never_drops() -> None:
    a = TraceAssembler(max_traces=2, max_spans=100)
    for index, trace in enumerate("abc"):
        a.add(0, index, [span(trace, "c", "r")], now=float(index))
    due = a.due(2.0)
    assert [(d.trace.trace_id[0], d.reason) for d in due] == [("a", "memory")]
    a2 = TraceAssembler(max_traces=100, max_spans=3)
    a2.add(0, 0, [span("a", "1", "r"), span("a", "2", "r")], now=0.0)
    a2.add(0, 1, [span("b", "1", "r"), span("b", "2", "r")], now=1.0)
    assert [d.trace.trace_id[0] for d in a2.due(1.0)] == ["a"]
    assert a2.spans_held == 2


def test_late_span_reopens_trace_with_its_earlier_spans() -> None:
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r"), span("a", "c1", "r")], now=0.0)
    assert len(a.due(1.0)) == 1
    a.add(0, 1, [span("a", "c2", "r")], now=2.0)
    (due,) = a.due(3.0)
    assert due.re_evaluation and {s.span_id for s in due.trace.spans} == {"r", "c1", "c2"}
    assert a.stats.re_evaluations == 1


def test_tenants_never_share_a_trace() -> None:
    a = TraceAssembler()
    a.add(0, 0, [span("a", "r", tenant="x"), span("a", "r", tenant="y")], now=0.0)
    assert sorted(d.trace.tenant for d in a.due(1.0)) == ["x", "y"]


def test_committable_stops_at_lowest_held_offset_per_partition() -> None:
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 5, [span("a", "c", "r")], now=0.0)  # held: no root
    a.add(0, 6, [span("b", "r")], now=0.0)
    a.add(1, 9, [span("c", "r")], now=0.0)
    a.due(1.0)
    assert a.committable() == {0: 5, 1: 10}
    a.add(0, 7, [span("a", "r")], now=1.0)
    a.due(2.0)
    assert a.committable() == {0: 8, 1: 10}


def test_forget_partitions_drops_only_their_traces() -> None:
    a = TraceAssembler()
    a.add(0, 1, [span("a", "c", "r")], now=0.0)
    a.add(1, 1, [span("b", "c", "r")], now=0.0)
    assert a.forget_partitions({0}) == 1
    assert a.traces_held == 1 and a.committable() == {1: 1}
