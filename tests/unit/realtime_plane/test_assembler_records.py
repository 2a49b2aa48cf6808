"""TurnAssembler with log records (issue 40): records joined to their spans whichever came
first, a record counting as its span's activity, records waiting for their spans, a late
record grading its turn again, records read twice left out, offsets of both topics."""

from __future__ import annotations

from pathgrade.realtime_plane.assembler import TurnAssembler
from pathgrade.schemas.model import SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, LogRecord

from tests.unit.realtime_plane.test_realtime_assembler import span

REMOTE = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | 0x200
CHOICE = "gen_ai.choice"


def record(
    trace: str, span_id: str, at: int = 5, name: str = CHOICE, tenant: str = "t"
) -> LogRecord:
    """A record of span `span_id` of trace `trace` * 32 with an output fact."""
    facts = {"pathgrade.facts.version": 1, "pathgrade.facts.output":
             f'{{"text":true,"pii":{{"card":{at}}}}}'}  # fmt: skip
    return LogRecord(tenant, trace * 32, span_id, at, at, name, attributes=facts)


def turn_spans(trace: str = "a") -> list:
    return [span(trace, "agent", "gw", flags=REMOTE, agent=True), span(trace, "chat", "agent")]


def test_records_before_their_spans_wait_for_them_and_are_joined() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add_records(0, 0, [record("a", "chat")], now=0.0)
    assert a.due(5.0) == [] and a.traces_held == 1  # no span yet: the record waits
    a.add(0, 0, turn_spans(), now=6.0)
    (due,) = a.due(7.0)
    chat = next(s for s in due.turn.spans if s.span_id == "chat")
    assert [r.span_id for r in chat.records] == ["chat"]
    assert chat.facts.output is not None and chat.facts.output.pii == {"card": 5}
    assert a.traces_held == 0


def test_a_record_within_the_quiet_window_delays_the_turn_and_is_joined() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, turn_spans(), now=0.0)
    a.add_records(0, 0, [record("a", "chat")], now=0.8)
    assert a.due(1.0) == []  # the record is activity of its span
    (due,) = a.due(1.8)
    assert [len(s.records) for s in due.turn.spans if s.span_id == "chat"] == [1]


def test_a_record_after_its_turn_was_graded_grades_it_again() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, turn_spans(), now=0.0)
    (first,) = a.due(1.0)
    assert not first.re_evaluation and all(not s.records for s in first.turn.spans)
    a.add_records(0, 0, [record("a", "chat")], now=2.0)
    (again,) = a.due(3.0)
    assert again.re_evaluation
    assert [len(s.records) for s in again.turn.spans if s.span_id == "chat"] == [1]


def test_a_turn_graded_again_for_a_late_record_alone_names_the_records_partition() -> None:
    """The alerts of a turn re-graded for a record are numbered under the partition its
    trace is read from, which the consumer owns; never under none (-1)."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(3, 0, turn_spans(), now=0.0)
    (first,) = a.due(1.0)
    assert first.partition == 3
    a.add_records(3, 7, [record("a", "chat")], now=2.0)
    (again,) = a.due(3.0)
    assert again.re_evaluation and again.partition == 3


def test_a_record_read_twice_is_left_out() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, turn_spans(), now=0.0)
    a.add_records(0, 0, [record("a", "chat")], now=0.1)
    a.add_records(0, 0, [record("a", "chat")], now=0.2)
    (due,) = a.due(2.0)
    assert a.stats.duplicate_records == 1
    assert [len(s.records) for s in due.turn.spans if s.span_id == "chat"] == [1]
    a.add_records(0, 0, [record("a", "chat")], now=3.0)  # after grading: still the same
    assert a.due(5.0) == [] and a.stats.duplicate_records == 2


def test_records_offsets_are_held_until_their_turn_is_graded() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add_records(3, 7, [record("a", "chat")], now=0.0)
    a.add_records(3, 8, [record("b", "chat")], now=0.0)
    a.add(3, 40, turn_spans("b"), now=0.0)
    a.due(1.0)  # b is graded; a's record still waits for its spans
    assert a.committable_records() == {3: 7} and a.committable() == {3: 41}
    a.add(3, 41, turn_spans("a"), now=1.5)
    a.due(3.0)
    assert a.committable_records() == {3: 9} and a.committable() == {3: 42}


def test_records_waiting_for_spans_that_never_come_leave_at_the_maximum_age() -> None:
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=10.0)
    a.add_records(0, 0, [record("a", "chat")], now=0.0)
    assert a.due(9.0) == [] and a.records_held == 1
    assert a.due(10.0) == [] and a.traces_held == 0 and a.records_held == 0
    assert a.committable_records() == {0: 1}


def test_forgetting_a_partition_forgets_traces_holding_only_its_records() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add_records(2, 0, [record("a", "chat")], now=0.0)
    assert a.forget_partitions({2}) == 1 and a.records_held == 0
