"""TurnAssembler at its edges (issue 41's mutation survivors): a later turn of a trace that
stops waiting for an earlier one, a conversation's earlier turn in a trace whose key sorts
after the waiting one's, every counter of the statistics, repeats within a message, a
trace with no turn yet held through its quiet window, a re-opened trace in its
conversation, turns that start at the same nanosecond or before a re-opened turn's late
span (neither waits), the memory bound at its value, and a handed-out turn that cannot be
changed by its reader."""

from __future__ import annotations

import dataclasses

import pytest
from pathgrade.realtime_plane.assembler import AssemblerStats, TurnAssembler

from tests.unit.realtime_plane.test_assembler_records import record
from tests.unit.realtime_plane.test_realtime_assembler import LOCAL, REMOTE, span, tops


def test_a_later_turn_of_a_trace_waits_for_an_earlier_one_only_so_long() -> None:
    """Turn 1 keeps getting spans (it is not quiet until 7 s), turn 2 got one at 4 s;
    turn 3 of the same trace, quiet at 1 s, waits `parent_wait_s` for them, then goes
    first; turns 1 and 2 go when turn 1 is quiet."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    a.add(0, 0, [span("a", f"t{n}", agent=True, start=100 * n) for n in (1, 2, 3)], now=0.0)
    for n, now in enumerate((2.0, 4.0)):
        a.add(0, n + 1, [span("a", f"c{n}", "t1", flags=LOCAL, start=101 + n)], now=now)
        assert a.due(now) == []
    a.add(0, 3, [span("a", "d", "t2", flags=LOCAL, start=201)], now=4.0)
    a.add(0, 4, [span("a", "c2", "t1", flags=LOCAL, start=103)], now=6.0)
    assert tops(a.due(6.0)) == ["t3"]
    assert tops(a.due(7.0)) == ["t1", "t2"] and a.traces_held == 0


@pytest.mark.parametrize(("first", "second"), [("a", "b"), ("b", "a")])
def test_a_conversation_turn_waits_for_an_earlier_one_whatever_the_trace_ids(
    first: str, second: str
) -> None:
    """Turn 2 (trace `second`) arrives first; turn 1 (trace `first`, started earlier) a
    little later: turn 2 is held back once, and both go in start order."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span(second, "t2", conversation="c", agent=True, start=200)], now=0.0)
    a.add(1, 0, [span(first, "t1", conversation="c", agent=True, start=100)], now=0.6)
    assert a.due(1.0) == []
    assert a.stats.held_back == 1
    assert tops(a.due(1.6)) == ["t1", "t2"]
    assert a.stats.held_back == 1 and a.traces_held == 0


def test_a_handed_out_turn_cannot_be_changed() -> None:
    """The evaluator and the alert sinks read one DueTurn: none of them can change it."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(3, 0, [span("a", "t1", agent=True)], now=0.0)
    (due,) = a.due(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        due.reason = "max_age"  # type: ignore[misc]
    assert (due.reason, due.partition) == ("quiet", 3)


def test_every_counter_counts_what_happened_once() -> None:
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=100.0)
    a.add(0, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=0.0)
    a.add(1, 0, [span("a", "t1", conversation="c", agent=True, start=100)], now=0.6)
    assert a.due(1.0) == []  # turn 2 held back behind turn 1
    assert tops(a.due(1.6)) == ["t1", "t2"]
    a.add(0, 1, [span("b", "t2", conversation="c", agent=True, start=200)], now=2.0)  # again
    a.add_records(0, 0, [record("a", "t1")], now=3.0)  # re-opens trace a
    a.add_records(0, 1, [record("a", "t1")], now=3.0)  # read again
    (again,) = a.due(4.0)
    assert again.re_evaluation
    a.add(0, 2, [span("c", "x", "r", flags=LOCAL)], now=5.0)  # its root never comes
    (old,) = a.due(105.0)
    assert old.reason == "max_age"
    assert a.stats == AssemblerStats(
        spans_added=4, turns_due=4, early_evaluations=1, re_evaluations=1, duplicate_spans=1,
        records_added=1, duplicate_records=1, held_back=1,
    )  # fmt: skip


def test_a_repeat_in_a_message_leaves_out_only_itself() -> None:
    """A span or record read again, or a record tied to no span, is left out, and what
    follows it in the same message (of its trace or another) is still buffered."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r"), span("a", "c1", "r")], now=0.0)
    a.add(0, 1, [span("a", "c1", "r"), span("a", "c2", "r")], now=0.2)  # held: c1 again
    a.add(0, 2, [span("a", "r"), span("b", "r")], now=0.2)  # a's only span again, then b
    a.add_records(0, 0, [record("a", "")], now=0.2)  # no span: left out
    assert a.spans_held == 4 and a.records_held == 0
    a.add_records(0, 1, [record("a", ""), record("a", "c1"), record("a", "c1"),
                         record("a", "c2")], now=0.2)  # fmt: skip
    assert a.records_held == 2 and a.stats.duplicate_records == 1
    graded = {d.turn.trace_id[0]: sorted(s.span_id for s in d.turn.spans) for d in a.due(1.2)}
    assert graded == {"a": ["c1", "c2", "r"], "b": ["r"]}
    a.add_records(0, 2, [record("a", "c2"), record("a", "c3")], now=2.0)  # graded: c2 again
    a.add(0, 3, [span("a", "c2", "r"), span("a", "c3", "r")], now=2.0)  # and c2's span
    (again,) = a.due(3.0)
    assert sorted(s.span_id for s in again.turn.spans) == ["c1", "c2", "c3", "r"]
    assert sum(len(s.records) for s in again.turn.spans) == 3
    assert a.stats.duplicate_spans == 3 and a.stats.duplicate_records == 2


def test_a_trace_is_held_through_its_quiet_window_even_with_no_turn_yet() -> None:
    """Spans of no GenAI operation (an HTTP server span) may yet get a model call under
    them: the trace, and its offset, are held until it has been quiet a window."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 4, [span("a", "srv", model=False)], now=0.0)
    assert a.due(0.5) == [] and a.traces_held == 1 and a.committable() == {0: 4}
    assert a.due(1.0) == [] and a.traces_held == 0 and a.committable() == {0: 5}


def test_a_reopened_trace_holds_back_later_turns_of_its_conversation() -> None:
    """Turn 1's trace, graded, gets a late span: turn 2 (another trace of the conversation,
    started later) waits for turn 1 to be graded again."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", conversation="c", agent=True, start=100)], now=0.0)
    assert tops(a.due(1.0)) == ["t1"]
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=2.0)
    a.add(0, 1, [span("a", "late", "t1", flags=LOCAL, start=150)], now=2.5)
    assert a.due(3.0) == []
    assert tops(a.due(3.5)) == ["t1", "t2"]


@pytest.mark.parametrize(
    ("records", "released"),
    [(0, []), (1, ["a"])],
)
def test_the_memory_bound_counts_spans_and_records_and_holds_at_the_bound(
    records: int, released: list[str]
) -> None:
    """max_spans 4: four spans held stay; a record more is over the bound."""
    a = TurnAssembler(max_spans=4)
    a.add(0, 0, [span("a", "1", "r", flags=LOCAL), span("a", "2", "r", flags=LOCAL)], now=0.0)
    a.add(0, 1, [span("b", "1", "r", flags=LOCAL), span("b", "2", "r", flags=LOCAL)], now=1.0)
    a.add_records(0, 0, [record("b", "1", at=n) for n in range(records)], now=1.0)
    assert [d.turn.trace_id[0] for d in a.due(1.0)] == released


def test_turns_of_a_conversation_that_start_together_do_not_wait_for_each_other() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", conversation="c", agent=True, start=100)], now=0.0)
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=100)], now=0.0)
    assert tops(a.due(1.0)) == ["t1", "t2"] and a.stats.held_back == 0


def test_a_turn_quiet_first_does_not_wait_for_one_that_started_at_the_same_time() -> None:
    """Trace b's turn is quiet first; trace a's (its key sorts first) started at the same
    nanosecond: only a span that started before the turn holds it back, so b's goes."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=100)], now=0.0)
    a.add(0, 0, [span("a", "t1", conversation="c", agent=True, start=100)], now=0.5)
    assert tops(a.due(1.0)) == ["t2"] and a.stats.held_back == 0
    assert tops(a.due(1.5)) == ["t1"]


def test_a_reopened_turn_does_not_wait_for_a_turn_that_started_after_it() -> None:
    """Trace b's turn 1 (start 100), graded, gets a late span (start 160); trace a's turn 2
    started between the two (130): turn 1, graded again, waits for nothing, though its
    late span started after turn 2."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(1, 0, [span("b", "t1", conversation="c", agent=True, start=100)], now=0.0)
    assert tops(a.due(1.0)) == ["t1"]
    a.add(1, 1, [span("b", "late", "t1", flags=LOCAL, start=160)], now=2.0)
    a.add(0, 0, [span("a", "t2", conversation="c", agent=True, start=130)], now=2.5)
    (again,) = a.due(3.0)
    assert (again.turn.top_span_id, again.re_evaluation) == ("t1", True)
    assert a.stats.held_back == 0
    assert tops(a.due(3.5)) == ["t2"]


def test_a_graded_turn_no_longer_holds_back_a_later_turn_of_another_trace() -> None:
    """Trace a: turn 1 graded at 1 s, turn 3 still busy; trace b's turn 2 started between
    them: it waits for nothing."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", conversation="c", agent=True, start=100),
                 span("a", "t3", conversation="c", agent=True, start=300)], now=0.0)  # fmt: skip
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=0.0)
    a.add(0, 1, [span("a", "c3", "t3", flags=LOCAL, start=301)], now=0.5)
    assert tops(a.due(1.0)) == ["t1", "t2"] and a.stats.held_back == 0
    assert tops(a.due(1.5)) == ["t3"]


def test_a_conversation_keeps_its_other_traces_when_one_leaves() -> None:
    """Traces a, b, c of one conversation: a is graded and leaves; c's turn still waits
    for b's, which started earlier."""
    a = TurnAssembler(quiet_window_s=1.0)
    for trace, start in (("a", 100), ("b", 200), ("c", 300)):
        a.add(0, 0, [span(trace, f"t{trace}", conversation="c", agent=True, start=start)], 0.0)
    a.add(0, 1, [span("b", "busy", "tb", flags=LOCAL, start=201)], now=0.5)
    assert tops(a.due(1.0)) == ["ta"]
    assert tops(a.due(1.5)) == ["tb", "tc"]


def test_a_forgotten_trace_leaves_its_conversation() -> None:
    """Partition 0 moves to another consumer: its trace of the conversation is dropped,
    and the conversation's turn on partition 1 goes without waiting for it."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", "x", flags=LOCAL, conversation="c", start=100)], now=0.0)
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=0.0)
    assert a.forget_partitions({0}) == 1
    assert tops(a.due(1.0)) == ["t2"] and a.stats.held_back == 0


def test_only_the_most_recent_graded_traces_are_remembered() -> None:
    """recent_traces 2: after a, b and c are graded, a span of a read again is new (a is
    forgotten, the oldest), those of b and c are repeats."""
    a = TurnAssembler(quiet_window_s=1.0, recent_traces=2)
    for n, trace in enumerate("abc"):
        a.add(0, n, [span(trace, "r", agent=True)], now=float(n))
        assert tops(a.due(n + 1.0)) == ["r"]
    a.add(0, 3, [span("c", "r", agent=True), span("b", "r", agent=True)], now=4.0)
    assert a.stats.duplicate_spans == 2 and a.traces_held == 0
    a.add(0, 4, [span("a", "r", agent=True)], now=4.0)
    assert a.stats.duplicate_spans == 2 and a.traces_held == 1


def test_a_record_of_another_turn_does_not_grade_a_turn_again() -> None:
    """Turn 1 graded before the trace had records; a record of turn 2's span comes: turn
    1 is as it was graded."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", agent=True, start=100),
                 span("a", "t2", agent=True, start=200)], now=0.0)  # fmt: skip
    a.add(0, 1, [span("a", "c2", "t2", flags=LOCAL, start=201)], now=0.5)
    assert tops(a.due(1.0)) == ["t1"]
    a.add_records(0, 0, [record("a", "c2")], now=1.2)
    assert tops(a.due(2.2)) == ["t2"] and a.stats.re_evaluations == 0


def test_a_turn_whose_every_span_has_a_record_leaves_once_graded() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "t1", agent=True), span("a", "c1", "t1", flags=LOCAL)], now=0.0)
    a.add_records(0, 0, [record("a", "t1"), record("a", "c1")], now=0.0)
    assert tops(a.due(1.0)) == ["t1"] and a.traces_held == 0


def test_loose_spans_under_a_local_parent_wait_up_to_the_maximum_age() -> None:
    """A chat whose agent span (local, flags) never came is not settled after
    `parent_wait_s` (that is for agent turns): it waits, then is a turn of its own."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0, max_age_s=300)
    a.add(0, 0, [span("a", "agent1", agent=True),
                 span("a", "chat", "lost", flags=LOCAL, start=10)], now=0.0)  # fmt: skip
    assert tops(a.due(1.0)) == ["agent1"]
    assert a.due(6.0) == [] and a.traces_held == 1
    (due,) = a.due(300.0)
    assert (due.turn.top_span_id, due.reason) == ("chat", "max_age")


def test_loose_spans_under_a_remote_parent_are_not_graded_here() -> None:
    """A chat whose agent runs in another process (remote parent): its turn is graded
    there; the trace leaves with its own turn, drained or quiet."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "agent1", agent=True),
                 span("a", "chat", "elsewhere", flags=REMOTE, start=10)], now=0.0)  # fmt: skip
    assert tops(a.due(1.0)) == ["agent1"] and a.traces_held == 0
    b = TurnAssembler(quiet_window_s=1.0)
    b.add(0, 0, [span("b", "agent1", agent=True),
                 span("b", "chat", "elsewhere", flags=REMOTE, start=10)], now=0.0)  # fmt: skip
    assert tops(b.release_all()) == ["agent1"]


def test_loose_spans_without_flags_settle_a_quiet_window_after_their_boundary() -> None:
    """A chat whose agent span is missing and the exporter set no flags: the trace waits a
    quiet window after the chat arrived, then leaves (exactly then, not later)."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "agent1", agent=True)], now=0.0)
    a.add(0, 1, [span("a", "chat", "lost", start=10)], now=0.5)
    assert tops(a.due(1.0)) == ["agent1"] and a.traces_held == 1
    assert a.due(1.5) == [] and a.traces_held == 0
    b = TurnAssembler(quiet_window_s=1.0)
    b.add(0, 0, [span("b", "agent1", agent=True)], now=0.0)
    assert tops(b.due(1.0)) == ["agent1"]
    b.add(0, 1, [span("b", "chat", "lost", start=10)], now=1.2)
    assert b.due(2.0) == [] and b.traces_held == 1 and b.committable() == {0: 1}
    assert b.due(2.2) == [] and b.traces_held == 0 and b.committable() == {0: 2}


def test_a_drained_turn_is_not_pending_its_context() -> None:
    """Drained before its local parent came (a trace without agents waits for it):
    incomplete, and not `context_pending` (which is for turns graded quiet)."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "c1", "r", flags=LOCAL)], now=0.0)
    (drained,) = a.release_all()
    assert drained.reason == "drain" and drained.turn.context_pending
    assert not drained.context_pending


def test_committable_offsets_survive_the_heaps_compaction() -> None:
    """Over 1,024 stale heap entries (traces graded since) compact the heaps: the offsets
    still held, in any order, stay the lowest committable."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 7, [span("x", "c", "r", flags=LOCAL)], now=0.0)  # waits for its root
    a.add(0, 3, [span("y", "c", "r", flags=LOCAL)], now=0.0)  # opened later, lower offset
    for n in range(1100):
        a.add(0, 100 + n, [span(f"{n:x}z", "r")], now=0.0)
    assert len(a.due(1.0)) == 1100 and a.traces_held == 2
    assert a.committable() == {0: 3}
    a.add(0, 1200, [span("y", "r")], now=2.0)
    a.due(3.0)
    assert a.committable() == {0: 7}


def test_next_due_is_the_first_wake_up_or_the_oldest_traces_maximum_age() -> None:
    """Nothing held: never. A held trace: its quiet window's end, pushed on by a later span;
    the maximum age when that comes first; nothing held again once it went."""
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=300.0)
    assert a.next_due() == float("inf")
    a.add(0, 0, [span("a", "t1", agent=True, start=100)], now=10.0)
    assert a.next_due() == 11.0
    a.add(0, 1, [span("a", "c1", "t1", flags=LOCAL, start=101)], now=10.5)
    assert a.next_due() == 11.0  # the stale wake-up first: early, never late
    assert a.due(11.0) == [] and a.next_due() == 11.5
    assert tops(a.due(11.5)) == ["t1"] and a.next_due() == float("inf")
    aging = TurnAssembler(quiet_window_s=1.0, max_age_s=0.5)
    aging.add(0, 0, [span("a", "t2", agent=True, start=100)], now=10.0)
    assert aging.next_due() == 10.5
