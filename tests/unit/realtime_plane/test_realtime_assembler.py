"""TraceAssembler: quiet window, max age, memory bound, late spans, committable offsets."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pathgrade.realtime_plane.assembler import TraceAssembler
from pathgrade.schemas.model import Span


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


def test_release_all_hands_out_everything_rooted_ones_complete() -> None:
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 5, [span("a", "r"), span("a", "c1", "r")], now=0.0)  # root, still in window
    a.add(1, 7, [span("b", "c1", "r")], now=0.0)  # root not seen yet
    assert a.due(0.5) == [] and a.committable() == {0: 5, 1: 7}
    released = {d.trace.trace_id[0]: (d.reason, d.incomplete) for d in a.release_all()}
    assert released == {"a": ("quiet", False), "b": ("drain", True)}
    assert a.traces_held == 0 and a.spans_held == 0
    assert a.committable() == {0: 6, 1: 8}


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


def test_later_span_pushes_the_quiet_deadline_back() -> None:
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r")], now=0.0)
    a.add(0, 1, [span("a", "c", "r")], now=0.8)
    assert a.due(1.0) == [] and a.due(1.7) == []
    (due,) = a.due(1.8)
    assert len(due.trace.spans) == 2


@dataclass
class _Held:
    first: float
    last: float
    root: bool
    offsets: dict[int, int]  # partition -> lowest offset


def _full_scan_due(held: dict[str, _Held], now: float) -> dict[str, str]:
    """What scanning every held trace finds due (the reference the assembler must match)."""
    return {
        trace: "max_age" if now - h.first >= 5.0 else "quiet"
        for trace, h in held.items()
        if now - h.first >= 5.0 or (h.root and now - h.last >= 1.0)
    }


def _full_scan_committable(held: dict[str, _Held], read: dict[int, int]) -> dict[int, int]:
    return {
        p: min([h.offsets[p] for h in held.values() if p in h.offsets] + [next_offset])
        for p, next_offset in read.items()
    }


def test_due_and_committable_match_a_full_scan_under_random_traffic() -> None:
    """The incremental bookkeeping gives what scanning every held trace would give."""
    rng = random.Random(4)
    a = TraceAssembler(quiet_window_s=1.0, max_age_s=5.0, max_traces=40)
    held: dict[str, _Held] = {}
    read: dict[int, int] = {}
    rooted: dict[str, bool] = {}
    for step in range(3000):
        now = step * 0.05
        trace, partition, root = (
            rng.choice("0123456789abcdef"),
            rng.randrange(2),
            rng.random() < 0.3,
        )
        offset = read.get(partition, 0)
        span_id = f"r{step}" if root else f"c{step}"  # every span once (a repeat is dropped)
        a.add(partition, offset, [span(trace, span_id, "" if root else "r")], now)
        read[partition] = offset + 1
        rooted[trace] = rooted.get(trace, False) or root  # a re-opened trace keeps its spans
        h = held.setdefault(trace, _Held(now, now, False, {}))
        h.last, h.root = now, rooted[trace]
        h.offsets.setdefault(partition, offset)
        released = {d.trace.trace_id[0]: d.reason for d in a.due(now)}
        expected = _full_scan_due(held, now)
        assert {t: r for t, r in released.items() if r != "memory"} == expected
        for trace in released:
            del held[trace]
        assert a.committable() == _full_scan_committable(held, read)


def test_a_span_read_again_is_left_out_and_does_not_reopen_an_evaluated_trace() -> None:
    """At-least-once delivery sends a message twice (a collector restart resends what its
    readers had not committed): the trace is neither doubled nor evaluated again."""
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 1, [span("a", "r"), span("a", "c1", "r")], now=0.0)
    a.add(0, 2, [span("a", "c1", "r")], now=0.5)  # the same span, read again
    (due,) = a.due(2.0)
    assert sorted(s.span_id for s in due.trace.spans) == ["c1", "r"]
    assert due.partition == 0
    a.add(1, 7, [span("a", "r"), span("a", "c1", "r")], now=3.0)  # all of it again, later
    assert a.due(10.0) == [] and a.traces_held == 0
    assert a.stats.duplicate_spans == 3
    assert a.committable() == {0: 3, 1: 8}  # what was left out is read, so committable
    a.add(1, 8, [span("a", "c2", "r")], now=11.0)  # a span that is new re-opens it
    (again,) = a.due(13.0)
    assert again.re_evaluation and len(again.trace.spans) == 3


def test_a_message_mixing_traces_and_repeats_buffers_each_span_once() -> None:
    """Spans of several traces, interleaved, and spans read before in one message."""
    a = TraceAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r"), span("b", "r"), span("a", "c1", "r"), span("a", "r")], now=0.0)
    assert a.stats.duplicate_spans == 1 and a.spans_held == 3
    due = {d.trace.trace_id[0]: [s.span_id for s in d.trace.spans] for d in a.due(1.0)}
    assert due == {"a": ["c1", "r"], "b": ["r"]}
    a.add(0, 1, [span("a", "c1", "r"), span("a", "c2", "r"), span("b", "r")], now=2.0)
    (again,) = a.due(3.0)
    assert again.re_evaluation and [s.span_id for s in again.trace.spans] == ["c1", "c2", "r"]
    assert a.stats.duplicate_spans == 3 and a.traces_held == 0
