"""TurnEvaluator at its edges (issue 41's mutation survivors): the history a turn is given
(only turns that started before it, any trace id, the latest `turns_per_conversation`),
the head a turn is read from, findings a previous reader alerted on, and an evaluation
that cannot be changed by its readers."""

from __future__ import annotations

import dataclasses

import pytest
from pathgrade.detectors import default_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas.model import Trace
from pathgrade.schemas.turns import TurnDigest

from tests.unit.realtime_plane.test_realtime_assembler import span


def digest(trace: str, start: int) -> TurnDigest:
    return TurnDigest(tenant="t", conversation_id="c", trace_id=trace * 32, start_ns=start,
                      succeeded_tools=[], confirmed_actions=[], span_id="top")  # fmt: skip


def turn(trace: str, start: int) -> DueTurn:
    top = span(trace, "top", agent=True, start=start, conversation="c")
    return DueTurn(Trace("t", trace * 32, [top], top_span_id="top"), "quiet", False)


def test_a_turn_is_given_the_turns_that_started_before_it_whatever_their_trace() -> None:
    evaluator = TurnEvaluator(default_policy())
    for d in (digest("f", 900), digest("a", 800), digest("b", 1000), digest("e", 700)):
        evaluator.remember(d)  # e at 700 is this very turn (an earlier digest of it)
    evaluation = evaluator.evaluate(turn("e", 1000), 0)
    assert evaluation.context.history == [digest("a", 800), digest("f", 900)]


def test_a_conversation_keeps_its_latest_turns_only() -> None:
    evaluator = TurnEvaluator(default_policy(), turns_per_conversation=3)
    for n, trace in enumerate("12345"):
        evaluator.remember(digest(trace, 100 * (n + 1)))
    evaluation = evaluator.evaluate(turn("e", 1000), 0)
    assert evaluation.context.history == [
        digest(t, 100 * n) for n, t in ((3, "3"), (4, "4"), (5, "5"))
    ]


def test_a_turn_is_read_from_its_top_span_wherever_it_is_listed() -> None:
    """The turn's service and agent are its top span's; a trace with no root (its spans'
    parents form a cycle, as a broken exporter may send) is read from its first span."""
    chat = span("a", "chat", "top", service="model-gateway")
    top = span("a", "top", agent=True, service="support", conversation="c")
    evaluator = TurnEvaluator(default_policy())
    assert (
        evaluator.evaluate(DueTurn(Trace("t", "a" * 32, [chat, top]), "quiet", False), 0).service
        == "support"
    )
    cycle = [span("b", "x", "z", service="first"), span("b", "y", "x", service="second"),
             span("b", "z", "y", service="third")]  # fmt: skip
    assert Trace("t", "b" * 32, cycle).root is None
    assert (
        evaluator.evaluate(DueTurn(Trace("t", "b" * 32, cycle), "quiet", False), 0).service
        == "first"
    )


def test_findings_a_previous_reader_alerted_on_raise_no_alert(demo: list) -> None:
    """`alerted` adds the previous reader's keys to those the trace alerted on here."""
    trace = next(t for s, t in demo if s == "plan_change_retry_storm")
    key = (trace.tenant, trace.trace_id)
    first = TurnEvaluator(default_policy()).evaluate(DueTurn(trace, "quiet", False), 1)
    keys = {a.alert_key for a in first.new_alerts}
    assert keys
    handed_over = TurnEvaluator(default_policy())
    handed_over.alerted(key, keys)
    assert handed_over.evaluate(DueTurn(trace, "quiet", False), 2).new_alerts == []
    here = TurnEvaluator(default_policy())
    assert here.evaluate(DueTurn(trace, "quiet", False), 1).new_alerts == first.new_alerts
    here.alerted(key, {"a key alerted elsewhere"})
    assert here.evaluate(DueTurn(trace, "quiet", True), 2).new_alerts == []


def test_an_evaluation_cannot_be_changed() -> None:
    """The sinks, the sampler and the turn sharing read one Evaluation."""
    evaluation = TurnEvaluator(default_policy()).evaluate(turn("e", 1000), 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        evaluation.service = "other"  # type: ignore[misc]
