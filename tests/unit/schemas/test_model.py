"""Trace: spans in start order, and a root found once per trace."""

from __future__ import annotations

from pathgrade.schemas.model import Span, Trace


def _span(span_id: str, parent: str, start_ns: int) -> Span:
    return Span("t", "a" * 32, span_id, parent, "step", "Internal", start_ns, start_ns + 1)


def test_root_is_the_earliest_span_without_a_parent_in_the_trace() -> None:
    trace = Trace("t", "a" * 32, [_span("c", "b", 3), _span("b", "x", 2), _span("a", "", 5)])
    assert trace.root is not None and trace.root.span_id == "b"  # its parent is not here


def test_a_trace_whose_spans_all_have_parents_in_it_has_no_root() -> None:
    trace = Trace("t", "a" * 32, [_span("a", "b", 1), _span("b", "a", 2)])
    assert trace.root is None
    assert trace.root is None  # the cached "no root" is not mistaken for "not looked up"


def test_root_is_looked_up_once_per_trace(monkeypatch) -> None:
    lookups = []
    find_root = Trace._find_root
    monkeypatch.setattr(Trace, "_find_root", lambda self: lookups.append(1) or find_root(self))
    trace = Trace("t", "a" * 32, [_span("b", "a", 2), _span("a", "", 1)])
    assert [trace.root, trace.root, trace.root] == [trace.spans[0]] * 3
    assert len(lookups) == 1


def test_the_cached_root_takes_no_part_in_equality() -> None:
    looked_up = Trace("t", "a" * 32, [_span("a", "", 1)])
    assert looked_up.root is not None
    assert looked_up == Trace("t", "a" * 32, [_span("a", "", 1)])


def test_spans_are_in_start_order_then_by_span_id() -> None:
    trace = Trace("t", "a" * 32, [_span("c", "", 2), _span("b", "a", 2), _span("d", "a", 1)])
    assert [s.span_id for s in trace.spans] == ["d", "b", "c"]
