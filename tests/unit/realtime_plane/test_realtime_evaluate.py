"""TurnEvaluator and Sampler over demo traces produced by the official OTel SDK."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
from pathgrade.detectors import default_policy, load_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.config import SamplerRates
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.realtime_plane.sampler import Sampler, hash_unit
from pathgrade.realtime_plane.turns import MAX_BATCH_BYTES, TurnBatcher, remote_digests
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.model import Trace
from pathgrade.schemas.sampled import SampledTrace
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest

from pathgrade.demo.scenarios import CLEAN_SCENARIOS

FAILURES = {
    "unrequested_billing_ticket": "PG110",
    "plan_change_retry_storm": "PG108",
    "kb_injection_equipment_reset": "PG117",
    "cross_account_plan_change": "PG112",
}
CLEAN = set(CLEAN_SCENARIOS)


def test_production_failures_alert_and_clean_turns_do_not(demo: list) -> None:
    """Each alert carries the tool its span calls (what the alerts page counts)."""
    evaluator = TurnEvaluator(default_policy())
    tools = set()
    for scenario, trace in demo:
        evaluation = evaluator.evaluate(DueTurn(trace, "quiet", False), now_ns=7)
        calls = {span.span_id: span.genai.tool_name for span in trace.spans}
        tools |= {a.tool for a in evaluation.new_alerts}
        assert [a.tool for a in evaluation.new_alerts] == [
            calls[a.span_id] for a in evaluation.new_alerts
        ]
        codes = {a.code for a in evaluation.new_alerts}
        if scenario in FAILURES:
            assert FAILURES[scenario] in codes, scenario
        elif scenario in CLEAN:
            assert codes == set(), scenario
        for alert in evaluation.new_alerts:
            assert Alert.from_json(alert.to_json()) == alert
            assert alert.tenant == "acme" and alert.service == "support-agent"
            assert alert.trace_end_ns == trace.root.end_ns and alert.detected_at_ns == 7
            assert alert.trace_start_ns == min(s.start_ns for s in trace.spans)
    assert "" in tools and len(tools) > 1  # alerts on a tool's span and on others


def test_re_evaluation_never_alerts_twice(demo: list) -> None:
    evaluator = TurnEvaluator(default_policy())
    trace = next(t for s, t in demo if s == "plan_change_retry_storm")
    first = evaluator.evaluate(DueTurn(trace, "quiet", False), 1)
    again = evaluator.evaluate(DueTurn(trace, "quiet", True), 2)
    assert first.new_alerts and again.new_alerts == []
    assert again.findings == first.findings
    assert evaluator.duplicates_suppressed == len(first.findings)


def test_risk_tier_policy_then_root_attribute_then_medium(demo: list, tmp_path) -> None:
    trace = demo[0][1]
    assert (
        TurnEvaluator(default_policy()).evaluate(DueTurn(trace, "quiet", False), 0).risk_tier
        == "medium"
    )
    trace.root.attributes["pathgrade.risk_tier"] = "high"
    try:
        assert (
            TurnEvaluator(default_policy()).evaluate(DueTurn(trace, "quiet", False), 0).risk_tier
            == "high"
        )
        policy = tmp_path / "policy.yaml"
        policy.write_text("services:\n  support-agent:\n    risk_tier: low\n")
        evaluator = TurnEvaluator(load_policy(policy), "policy.yaml")
        evaluation = evaluator.evaluate(DueTurn(trace, "quiet", False), 0)
        assert evaluation.risk_tier == "low"
    finally:
        del trace.root.attributes["pathgrade.risk_tier"]


def test_earlier_turn_confirmation_reaches_the_detectors(demo: list) -> None:
    """PG111: an irreversible reset confirmed on the previous turn of the conversation."""
    confirmed_here = next(t for s, t in demo if s == "requested_reset")
    trace = _without_confirmation(confirmed_here)
    clean = TurnEvaluator(default_policy()).evaluate(DueTurn(confirmed_here, "quiet", False), 0)
    assert "PG111" not in {a.code for a in clean.new_alerts}
    tool = next(s for s in trace.spans if s.genai.tool_name == "reset_equipment")
    confirmed = {
        "name": "reset_equipment",
        "arguments": json.loads(tool.genai.tool_arguments),
    }
    earlier = Trace("acme", "e" * 32, [_copy_root(trace, confirmed)])
    evaluator = TurnEvaluator(default_policy())
    alone = TurnEvaluator(default_policy()).evaluate(DueTurn(trace, "quiet", False), 0)
    assert "PG111" in {a.code for a in alone.new_alerts}
    evaluator.evaluate(DueTurn(earlier, "quiet", False), 0)
    after = evaluator.evaluate(DueTurn(trace, "quiet", False), 0)
    assert "PG111" not in {a.code for a in after.new_alerts}


def test_a_digest_another_consumer_published_reaches_the_detectors(demo: list) -> None:
    """PG111 with the confirming turn's digest from `pathgrade.turns`: it counts when that
    turn started earlier, not when it started later; the evaluator digests each turn it
    evaluates (tools that succeeded, the confirmation) for later turns."""
    trace = _without_confirmation(next(t for s, t in demo if s == "requested_reset"))
    tool = next(s for s in trace.spans if s.genai.tool_name == "reset_equipment")
    confirmed = ConfirmedAction(
        name="reset_equipment", arguments=json.loads(tool.genai.tool_arguments)
    )
    conversation = trace.root.genai.conversation_id
    earlier = TurnDigest(
        tenant="acme", conversation_id=conversation, trace_id="e" * 32,
        start_ns=trace.spans[0].start_ns - 10**9, succeeded_tools=[],
        confirmed_actions=[confirmed],
    )  # fmt: skip
    evaluator = TurnEvaluator(default_policy())
    evaluator.remember(earlier)
    after = evaluator.evaluate(DueTurn(trace, "quiet", False), 0)
    assert "PG111" not in {a.code for a in after.new_alerts}
    assert after.digest == TurnDigest(
        tenant="acme", conversation_id=conversation, trace_id=trace.trace_id,
        start_ns=trace.spans[0].start_ns, confirmed_actions=[],
        succeeded_tools=[c.genai.tool_name for c in trace.by_operation("execute_tool")
                         if c.status_code != "Error" and not c.genai.error_type],
        span_id=trace.root.span_id,
    )  # fmt: skip
    assert "reset_equipment" in after.digest.succeeded_tools

    evaluator = TurnEvaluator(default_policy())
    evaluator.remember(earlier.model_copy(update={"start_ns": trace.spans[0].start_ns + 1}))
    alone = evaluator.evaluate(DueTurn(trace, "quiet", False), 0)
    assert "PG111" in {a.code for a in alone.new_alerts}


def test_turn_batches_round_trip_and_a_consumer_skips_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    digests = [
        TurnDigest(
            tenant="acme", conversation_id=f"conv-{n}", trace_id=f"{n:032x}", start_ns=n,
            succeeded_tools=["lookup_order"],
            confirmed_actions=[ConfirmedAction(name="reset", arguments={"device": "router"})],
        )
        for n in range(3)
    ]  # fmt: skip
    batcher = TurnBatcher("w1")
    assert all(batcher.add(d) for d in digests)
    (sent,) = batcher.take()
    assert batcher.take() == []  # taken once
    message = SimpleNamespace(value=sent["value"], headers=sent["headers"], offset=3)
    assert sent["key"] == b"w1"
    assert remote_digests(message, "w1") == []
    assert remote_digests(message, "w2") == digests  # in the order they were evaluated
    garbage = SimpleNamespace(value=b'{"turns": [{"tenant": 1}]}', headers=[], offset=4)
    assert remote_digests(garbage, "w2") == []
    assert "offset 4" in caplog.text and "trace_id" in caplog.text


def test_turn_batches_stay_under_the_size_limit_and_an_oversized_digest_is_not_shared(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def digest(n: int, note_bytes: int) -> TurnDigest:
        action = ConfirmedAction(name="reset", arguments={"note": "x" * note_bytes})
        return TurnDigest(tenant="acme", conversation_id="c", trace_id=f"{n:032x}",
                          start_ns=n, succeeded_tools=[], confirmed_actions=[action])  # fmt: skip

    batcher = TurnBatcher("w1")
    third = MAX_BATCH_BYTES // 3
    sent = [digest(n, third) for n in range(7)]
    assert all(batcher.add(d) for d in sent)
    assert not batcher.add(digest(99, MAX_BATCH_BYTES))
    assert f"{99:032x}" in caplog.text and "not shared" in caplog.text
    messages = batcher.take()
    assert len(messages) == 4 and all(len(m["value"]) <= MAX_BATCH_BYTES for m in messages)
    received = [d for m in messages for d in remote_digests(SimpleNamespace(**m, offset=0), "w2")]
    assert received == sent


def _without_confirmation(trace: Trace) -> Trace:
    """The same turn as if the user had not confirmed anything on it."""
    root = trace.root
    attributes = {k: v for k, v in root.attributes.items() if k != "pathgrade.confirmed_action"}
    spans = [dataclasses.replace(s, attributes=attributes) if s is root else s for s in trace.spans]
    return Trace(trace.tenant, trace.trace_id, spans)


def _copy_root(trace: Trace, confirmed: dict) -> object:
    root = trace.root
    attributes = {**root.attributes, "pathgrade.confirmed_action": json.dumps(confirmed)}
    return dataclasses.replace(
        root, span_id="e" * 16, start_ns=root.start_ns - 10**9, end_ns=root.start_ns - 1,
        trace_id="e" * 32, attributes=attributes,
    )  # fmt: skip


def test_hash_sampling_lower_rate_is_a_subset_and_flags_add_reasons(demo: list) -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    low = {t for t in ids if hash_unit(t) < 0.05}
    high = {t for t in ids if hash_unit(t) < 0.2}
    assert low < high and 0.1 < len(high) / len(ids) < 0.3
    evaluator = TurnEvaluator(default_policy())
    sampler = Sampler(SamplerRates(tiers={"medium": 0.0}, tool_error=1.0))
    reasons = {}
    for scenario, trace in demo:
        sample = sampler.decide(evaluator.evaluate(DueTurn(trace, "quiet", False), 0), 9)
        reasons[scenario] = sample.reasons if sample else None
        if sample:
            assert SampledTrace.from_json(sample.to_json()) == sample
    assert reasons["order_status"] is None
    assert reasons["tool_error_timeout"] == ["finding:PG101", "tool_error"]
    assert "finding:PG110" in reasons["unrequested_billing_ticket"]
    everything = Sampler(SamplerRates(tiers={"medium": 1.0}))
    clean = next(t for s, t in demo if s == "order_status")
    assert everything.decide(evaluator.evaluate(DueTurn(clean, "quiet", True), 0), 0).reasons == [
        "base_rate"
    ]


def test_alerts_cli_query_filters_and_errors_name_the_flag() -> None:
    import datetime

    from pathgrade.cli.alerts import alerts_query
    from pathgrade.cli.support import CliError, since_ns, since_timestamp

    now = datetime.datetime(2025, 7, 1, 12, tzinfo=datetime.UTC)
    assert since_timestamp("15m", now) == now - datetime.timedelta(minutes=15)
    assert since_timestamp("2025-07-01T11:00:00", now).hour == 11
    assert since_ns(None) is None
    assert since_ns("2025-07-01T11:00:00+00:00") == int(now.timestamp() - 3600) * 10**9
    sql, parameters = alerts_query(since_ns("1h"), "PG110", 10)
    assert "FROM alerts_view WHERE" in sql and parameters["code"] == "PG110"
    assert "DetectedAtNs >=" in sql and parameters["since"] > 0
    with pytest.raises(CliError, match="--code"):
        alerts_query(None, "110", 10)
    with pytest.raises(CliError, match="--since"):
        since_timestamp("yesterday")
