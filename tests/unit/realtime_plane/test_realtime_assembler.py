"""TurnAssembler: turns found as spans arrive, due by quiet window and settled boundary
(remote parent, no flags, a local parent waited for), several turns per trace, turns of a
conversation in start order, max age, memory bound, late spans, committable offsets."""

from __future__ import annotations

import random
from dataclasses import dataclass

from pathgrade.realtime_plane.assembler import DueTurn, TurnAssembler
from pathgrade.schemas.model import (
    SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
    SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK,
    GenAIFields,
    Span,
)

LOCAL = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
REMOTE = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


def span(
    trace: str, span_id: str, parent: str = "", tenant: str = "t", *, flags: int = 0,
    agent: bool = False, start: int = 1, conversation: str = "", service: str = "svc",
    model: bool = True,
) -> Span:  # fmt: skip
    """A span of trace `trace` * 32: an invoke_agent span (`agent`), else a chat span
    (`model`: a span of no GenAI operation when False)."""
    operation = "invoke_agent" if agent else "chat" if model else ""
    fields = GenAIFields(operation=operation, conversation_id=conversation)
    name = "invoke_agent support" if agent else "s"
    return Span(tenant, trace * 32, span_id, parent, name, "Internal", start, start + 1,
                service, genai=fields, flags=flags)  # fmt: skip


def tops(due: list[DueTurn]) -> list[str]:
    return [d.turn.top_span_id for d in due]


def test_a_turn_inside_a_server_span_whose_parent_is_remote_is_due_at_once() -> None:
    """The gateway's span never comes (it exports elsewhere): the server span's remote
    parent settles the turn, which is due a quiet window after its last span."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "chat", "agent", flags=LOCAL),
                 span("a", "agent", "srv", flags=LOCAL, agent=True),
                 span("a", "srv", "gateway", flags=REMOTE)], now=0.0)  # fmt: skip
    assert a.due(0.9) == []
    (due,) = a.due(1.0)
    assert (due.reason, due.incomplete, due.re_evaluation) == ("quiet", False, False)
    assert due.turn.top_span_id == "agent" and [s.span_id for s in due.turn.context] == ["srv"]
    assert sorted(s.span_id for s in due.turn.spans) == ["agent", "chat"]
    assert a.traces_held == 0


def test_the_same_without_the_server_span() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "chat", "agent", flags=LOCAL),
                 span("a", "agent", "gateway", flags=REMOTE, agent=True)], now=0.0)  # fmt: skip
    assert tops(a.due(1.0)) == ["agent"]


def test_without_flags_a_missing_parent_is_given_up_after_the_quiet_window() -> None:
    """An exporter that sets no flags: the turn's top ended and its parent did not arrive
    within the quiet window."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "agent", "srv", agent=True), span("a", "chat", "agent")], now=0.0)
    assert a.due(0.5) == []
    (due,) = a.due(1.0)
    assert (due.turn.top_span_id, due.reason) == ("agent", "quiet")


def test_an_agent_turn_waits_for_its_local_parent_then_goes_without_it() -> None:
    """The enclosing span ended just after the agent and comes in the SDK's next export:
    waited for (`parent_wait_s`) and read as context; when it never comes, the turn is
    graded without it."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    a.add(0, 0, [span("a", "agent", "srv", flags=LOCAL, agent=True)], now=0.0)
    assert a.due(4.0) == []
    a.add(0, 1, [span("a", "srv", "gateway", flags=REMOTE)], now=4.0)
    (due,) = a.due(5.0)
    assert [s.span_id for s in due.turn.context] == ["srv"] and not due.re_evaluation
    b = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    b.add(0, 0, [span("b", "agent", "srv", flags=LOCAL, agent=True)], now=0.0)
    assert b.due(4.9) == []
    (due,) = b.due(5.0)
    assert due.reason == "quiet" and due.turn.context == []


def test_a_trace_without_a_genai_operation_leaves_ungraded() -> None:
    """A service's health check (no model, tool or agent call) is no turn: it leaves the
    buffer once quiet, and nothing is graded."""
    a = TurnAssembler(quiet_window_s=1.0)
    health = [span("a", "db", "srv", flags=LOCAL, model=False),
              span("a", "srv", "lb", flags=REMOTE, model=False)]  # fmt: skip
    a.add(0, 0, health, now=0.0)
    assert a.due(1.0) == [] and a.traces_held == 0


def test_a_turn_graded_before_its_local_parent_came_says_its_context_is_pending() -> None:
    """A session span that ends with the conversation: its turns are graded without it
    (context pending) and again with it when it comes; a remote parent or none settles
    the context."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    a.add(0, 0, [span("a", "agent", "session", flags=LOCAL, agent=True)], now=0.0)
    (first,) = a.due(5.0)
    assert first.context_pending and not first.re_evaluation
    a.add(0, 1, [span("a", "session", "gateway", flags=REMOTE)], now=20.0)
    (again,) = a.due(21.0)
    assert again.re_evaluation and not again.context_pending
    b = TurnAssembler(quiet_window_s=1.0)
    b.add(0, 0, [span("b", "agent", "gateway", flags=REMOTE, agent=True)], now=0.0)
    b.add(0, 0, [span("c", "agent", agent=True)], now=0.0)
    assert [d.context_pending for d in b.due(1.0)] == [False, False]


def test_spans_without_an_agent_wait_for_their_local_parent_up_to_the_maximum_age() -> None:
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=300)
    a.add(0, 0, [span("a", "c1", "r", flags=LOCAL), span("a", "c2", "r", flags=LOCAL)], now=0.0)
    assert a.due(299.0) == []
    (due,) = a.due(300.0)  # one turn: the spans hang from one missing span
    assert due.reason == "max_age" and due.incomplete and len(due.turn.spans) == 2
    b = TurnAssembler(quiet_window_s=1.0)
    b.add(0, 0, [span("b", "c1", "r", flags=LOCAL)], now=0.0)
    b.add(0, 1, [span("b", "r")], now=5.0)
    assert b.due(5.9) == []
    (due,) = b.due(6.0)
    assert due.turn.top_span_id == "r" and {s.span_id for s in due.turn.spans} == {"c1", "r"}


def test_three_agent_runs_in_one_trace_are_three_turns() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    runs = [span("a", f"agent{n}", "srv", flags=LOCAL, agent=True, start=10 * n) for n in (1, 2, 3)]
    chats = [span("a", f"chat{n}", f"agent{n}", flags=LOCAL, start=10 * n + 1) for n in (1, 2, 3)]
    a.add(0, 0, [*runs, *chats, span("a", "srv", "gw", flags=REMOTE)], now=0.0)
    due = a.due(1.0)
    assert tops(due) == ["agent1", "agent2", "agent3"]
    assert [sorted(s.span_id for s in d.turn.spans) for d in due] == [
        [f"agent{n}", f"chat{n}"] for n in (1, 2, 3)
    ]
    assert all(d.turn.own_context == 0 for d in due)  # the server span encloses all three


def test_a_trace_holding_a_whole_conversation_grades_each_turn_as_it_ends() -> None:
    """One trace per session: the session's root span ends with the session. Each turn
    is graded a quiet window after it ended; the root, when it comes, re-opens them."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    graded = []
    for n in range(5):
        now = 10.0 * n
        a.add(0, n, [span("s", f"chat{n}", f"turn{n}", flags=LOCAL, start=100 * n + 1),
                     span("s", f"turn{n}", "session", flags=LOCAL, agent=True,
                          start=100 * n, conversation="c")], now=now)  # fmt: skip
        assert a.due(now + 4.9) == []  # its enclosing session span is waited for
        graded += tops(a.due(now + 5.0))
    assert graded == [f"turn{n}" for n in range(5)]
    a.add(0, 5, [span("s", "session")], now=60.0)
    again = a.due(61.0)
    assert tops(again) == [f"turn{n}" for n in range(5)]
    assert all(d.re_evaluation and d.turn.context[0].span_id == "session" for d in again)


def test_turns_of_a_conversation_are_graded_in_start_order() -> None:
    """Turn 2 arrives first; turn 1 (another trace, started earlier) arrives within its
    window: turn 2 waits for it, so turn 2's detectors see turn 1 (a confirmation)."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=0.0)
    a.add(1, 0, [span("a", "t1", conversation="c", agent=True, start=100)], now=0.6)
    assert a.due(1.0) == []  # turn 2 is quiet, turn 1 not yet
    assert tops(a.due(1.6)) == ["t1", "t2"]
    assert a.stats.held_back >= 1


def test_two_overlapping_requests_of_a_conversation_never_wait_for_each_other() -> None:
    """Two turns of one conversation, each inside a server span whose parent is remote,
    started within the server spans' lead of each other: each trace's server span started
    before the other's agent span, yet neither waits the parent wait for the other; the
    request that started first goes first."""
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0)
    for trace, start in (("b", 100), ("a", 100)):
        a.add(0, 0, [span(trace, f"agent-{trace}", f"srv-{trace}", flags=LOCAL, agent=True,
                          conversation="c", start=start),
                     span(trace, f"srv-{trace}", "gateway", flags=REMOTE, conversation="c",
                          start=start - 5, model=False)], now=0.0)  # fmt: skip
    assert tops(a.due(1.0)) == ["agent-a", "agent-b"]
    assert a.traces_held == 0


def test_a_conversation_turn_waits_for_an_earlier_one_only_so_long() -> None:
    a = TurnAssembler(quiet_window_s=1.0, parent_wait_s=5.0, max_age_s=300)
    a.add(0, 0, [span("a", "t1", "x", flags=LOCAL, conversation="c", start=100)], now=0.0)
    a.add(1, 0, [span("b", "t2", conversation="c", agent=True, start=200)], now=0.0)
    assert a.due(5.9) == []
    assert tops(a.due(6.0)) == ["t2"]  # turn 1 waits for its parent up to the maximum age


def test_loose_spans_whose_agent_never_came_are_graded_at_the_maximum_age() -> None:
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=300)
    loose = span("a", "chat", "lost-agent", flags=LOCAL, start=10)  # after agent1 ran
    loose.genai.operation = "chat"
    a.add(0, 0, [span("a", "agent1", agent=True), loose], now=0.0)
    assert tops(a.due(1.0)) == ["agent1"]
    assert a.traces_held == 1  # the chat may still get its agent span
    (due,) = a.due(300.0)
    assert (due.turn.top_span_id, due.reason) == ("chat", "max_age")


def test_memory_bound_evaluates_oldest_early_never_drops() -> None:
    a = TurnAssembler(max_traces=2, max_spans=100)
    for index, trace in enumerate("abc"):
        a.add(0, index, [span(trace, "c", "r", flags=LOCAL)], now=float(index))
    due = a.due(2.0)
    assert [(d.turn.trace_id[0], d.reason) for d in due] == [("a", "memory")]
    a2 = TurnAssembler(max_traces=100, max_spans=3)
    a2.add(0, 0, [span("a", "1", "r", flags=LOCAL), span("a", "2", "r", flags=LOCAL)], now=0.0)
    a2.add(0, 1, [span("b", "1", "r", flags=LOCAL), span("b", "2", "r", flags=LOCAL)], now=1.0)
    assert [d.turn.trace_id[0] for d in a2.due(1.0)] == ["a"]
    assert a2.spans_held == 2


def test_release_all_hands_out_everything_settled_ones_complete() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 5, [span("a", "r"), span("a", "c1", "r", flags=LOCAL)], now=0.0)  # in window
    a.add(1, 7, [span("b", "c1", "r", flags=LOCAL)], now=0.0)  # root not seen yet
    assert a.due(0.5) == [] and a.committable() == {0: 5, 1: 7}
    released = {d.turn.trace_id[0]: (d.reason, d.incomplete) for d in a.release_all()}
    assert released == {"a": ("quiet", False), "b": ("drain", True)}
    assert a.traces_held == 0 and a.spans_held == 0
    assert a.committable() == {0: 6, 1: 8}


def test_late_span_reopens_trace_with_its_earlier_spans() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r"), span("a", "c1", "r", flags=LOCAL)], now=0.0)
    assert len(a.due(1.0)) == 1
    a.add(0, 1, [span("a", "c2", "r", flags=LOCAL)], now=2.0)
    (due,) = a.due(3.0)
    assert due.re_evaluation and {s.span_id for s in due.turn.spans} == {"r", "c1", "c2"}
    assert a.stats.re_evaluations == 1


def test_tenants_never_share_a_trace() -> None:
    a = TurnAssembler()
    a.add(0, 0, [span("a", "r", tenant="x"), span("a", "r", tenant="y")], now=0.0)
    assert sorted(d.turn.tenant for d in a.due(1.0)) == ["x", "y"]


def test_committable_stops_at_lowest_held_offset_per_partition() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 5, [span("a", "c", "r", flags=LOCAL)], now=0.0)  # held: waits for its root
    a.add(0, 6, [span("b", "r")], now=0.0)
    a.add(1, 9, [span("c", "r")], now=0.0)
    a.due(1.0)
    assert a.committable() == {0: 5, 1: 10}
    a.add(0, 7, [span("a", "r")], now=1.0)
    a.due(2.0)
    assert a.committable() == {0: 8, 1: 10}


def test_forget_partitions_drops_only_their_traces() -> None:
    a = TurnAssembler()
    a.add(0, 1, [span("a", "c", "r", flags=LOCAL)], now=0.0)
    a.add(1, 1, [span("b", "c", "r", flags=LOCAL)], now=0.0)
    assert a.forget_partitions({0}) == 1
    assert a.traces_held == 1 and a.committable() == {1: 1}


def test_later_span_pushes_the_quiet_deadline_back() -> None:
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r")], now=0.0)
    a.add(0, 1, [span("a", "c", "r", flags=LOCAL)], now=0.8)
    assert a.due(1.0) == [] and a.due(1.7) == []
    (due,) = a.due(1.8)
    assert len(due.turn.spans) == 2


@dataclass
class _Held:
    first: float
    last: float
    root: bool
    offsets: dict[int, int]  # partition -> lowest offset


def _full_scan_due(held: dict[str, _Held], now: float) -> dict[str, str]:
    """What scanning every held trace finds due (the reference the assembler must match):
    children wait for their local root, as the SDK's flags say."""
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
    a = TurnAssembler(quiet_window_s=1.0, max_age_s=5.0, max_traces=40)
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
        root = root and not rooted.get(trace, False)  # one root a trace, children under it
        span_id = "r" if root else f"c{step}"  # every span once (a repeat is dropped)
        parent, flags = ("", 0) if root else ("r", LOCAL)
        a.add(partition, offset, [span(trace, span_id, parent, flags=flags)], now)
        read[partition] = offset + 1
        rooted[trace] = rooted.get(trace, False) or root  # a re-opened trace keeps its spans
        h = held.setdefault(trace, _Held(now, now, False, {}))
        h.last, h.root = now, rooted[trace]
        h.offsets.setdefault(partition, offset)
        released = {d.turn.trace_id[0]: d.reason for d in a.due(now)}
        expected = _full_scan_due(held, now)
        assert {t: r for t, r in released.items() if r != "memory"} == expected
        for trace in released:
            del held[trace]
        assert a.committable() == _full_scan_committable(held, read)


def test_a_span_read_again_is_left_out_and_does_not_reopen_an_evaluated_trace() -> None:
    """At-least-once delivery sends a message twice (a collector restart resends what its
    readers had not committed): the trace is neither doubled nor evaluated again."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 1, [span("a", "r"), span("a", "c1", "r")], now=0.0)
    a.add(0, 2, [span("a", "c1", "r")], now=0.5)  # the same span, read again
    (due,) = a.due(2.0)
    assert sorted(s.span_id for s in due.turn.spans) == ["c1", "r"]
    assert due.partition == 0
    a.add(1, 7, [span("a", "r"), span("a", "c1", "r")], now=3.0)  # all of it again, later
    assert a.due(10.0) == [] and a.traces_held == 0
    assert a.stats.duplicate_spans == 3
    assert a.committable() == {0: 3, 1: 8}  # what was left out is read, so committable
    a.add(1, 8, [span("a", "c2", "r")], now=11.0)  # a span that is new re-opens it
    (again,) = a.due(13.0)
    assert again.re_evaluation and len(again.turn.spans) == 3


def test_a_message_mixing_traces_and_repeats_buffers_each_span_once() -> None:
    """Spans of several traces, interleaved, and spans read before in one message."""
    a = TurnAssembler(quiet_window_s=1.0)
    a.add(0, 0, [span("a", "r"), span("b", "r"), span("a", "c1", "r"), span("a", "r")], now=0.0)
    assert a.stats.duplicate_spans == 1 and a.spans_held == 3
    due = {d.turn.trace_id[0]: [s.span_id for s in d.turn.spans] for d in a.due(1.0)}
    assert due == {"a": ["c1", "r"], "b": ["r"]}
    a.add(0, 1, [span("a", "c1", "r"), span("a", "c2", "r"), span("b", "r")], now=2.0)
    (again,) = a.due(3.0)
    assert again.re_evaluation and [s.span_id for s in again.turn.spans] == ["c1", "c2", "r"]
    assert a.stats.duplicate_spans == 3 and a.traces_held == 0
