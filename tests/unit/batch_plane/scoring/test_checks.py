"""The per-case checks catalogue: one registry, each check's fixtures, declarations and the
outcomes a check gives when what it needs was not captured."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.scoring.checks import (
    CHECKS,
    AttemptEvidence,
    CheckOutcome,
    CheckSpec,
    all_of,
    run_checks,
)
from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.content.fingerprints import FactSecret
from pathgrade.detectors import default_policy, run_detectors
from pydantic import ValidationError

from tests.support.paths import REPO_ROOT

EXPECTED_CATALOGUE = {
    "tool_called", "tool_not_called", "argument_equals", "ordering", "no_repeated_call",
    "terminated", "answer_regex", "answer_no_pii", "answer_json", "answer_number", "budget",
    "detectors_quiet",
}  # fmt: skip


def run(name: str, params: dict, attempt: FixtureAttempt) -> CheckOutcome:
    check = CHECKS[name]
    return check.run(check.params.model_validate(params), attempt.evidence())


def test_the_catalogue_is_one_registry_of_the_documented_checks() -> None:
    assert set(CHECKS) == EXPECTED_CATALOGUE
    catalogue = (REPO_ROOT / "docs" / "datasets.md").read_text()
    for name, check in CHECKS.items():
        assert check.name == name and check.function is not None
        assert len(check.doc) > 60, name
        assert f"| `{name}` |" in catalogue, f"docs/datasets.md does not list {name}"


@pytest.mark.parametrize("name", sorted(EXPECTED_CATALOGUE))
def test_each_check_passes_its_passing_fixture_and_fails_its_failing_one(name: str) -> None:
    check = CHECKS[name]
    assert run(name, check.passing.params, check.passing.attempt) == CheckOutcome.ok()
    failed = run(name, check.failing.params, check.failing.attempt)
    assert failed.passed is False and failed.reason, failed


@pytest.mark.parametrize("name", sorted(EXPECTED_CATALOGUE))
def test_each_params_model_refuses_unknown_keys(name: str) -> None:
    params = {**CHECKS[name].passing.params, "no_such_param": 1}
    with pytest.raises(ValidationError, match="no_such_param"):
        CHECKS[name].params.model_validate(params)


def test_reasons_say_exactly_what_went_wrong() -> None:
    lookup = FixtureAttempt(calls=(("lookup_order", {"order_id": "A1002"}),))
    assert run("argument_equals", {"tool": "lookup_order", "argument": "order_id",
                                   "value": "A1001"}, lookup).reason == (
        "lookup_order was called with order_id='A1002', expected order_id='A1001'."
    )  # fmt: skip
    refund = {"tool": "issue_refund", "argument": "order_id", "value": "A1"}
    assert run("argument_equals", refund, lookup).reason == "issue_refund was not called."
    short = FixtureAttempt(answer="Reference ORD-12345.")
    assert run("answer_regex", {"pattern": r"\bORD-\d{6}\b"}, short).reason == (
        r"The final answer has no match of /\bORD-\d{6}\b/."
    )
    leaked = FixtureAttempt(answer="Card 4111 1111 1111 1111 on file, write to a@b.io")
    assert run("answer_no_pii", {}, leaked).reason == (
        "The final answer contains an e-mail address and a Luhn-valid card number."
    )  # the kinds, never the values
    assert run("answer_regex", {"pattern": "@", "present": False}, leaked).reason == (
        "The final answer matches /@/ ('@'), which must be absent."
    )
    missing = run(
        "answer_json", {"required_keys": ["id", "status"]}, FixtureAttempt(answer='{"id": 1}')
    )
    assert missing.reason == "The final answer lacks key(s) status."
    assert run("answer_json", {}, FixtureAttempt(answer="sure: {}")).reason.startswith(
        "The final answer is not JSON"
    )
    json_number = FixtureAttempt(answer='{"total": 41.5, "n": 7}')
    assert run("answer_number", {"expected": 42, "key": "total", "relative_tolerance": 0.05},
               json_number).passed  # fmt: skip
    assert run("answer_number", {"expected": 42, "key": "total"}, json_number).reason == (
        "The final answer's number is 41.5, expected 42 ± 0."
    )
    assert run("answer_number", {"expected": 1}, FixtureAttempt(answer="none")).reason == (
        "The final answer holds no number."
    )


def test_a_number_is_never_a_boolean_and_tolerance_is_for_numbers_only() -> None:
    flags = FixtureAttempt(calls=(("set_flag", {"on": True, "n": 1}),))
    assert not run(
        "argument_equals", {"tool": "set_flag", "argument": "on", "value": 1}, flags
    ).passed
    assert run("argument_equals", {"tool": "set_flag", "argument": "n", "value": 1.0}, flags).passed
    assert not run("argument_equals", {"tool": "set_flag", "argument": "on", "value": 1,
                                       "tolerance": 1}, flags).passed  # fmt: skip


def test_what_was_not_captured_leaves_a_check_undecided_never_passed() -> None:
    uncaptured = FixtureAttempt(calls=(("lookup_order", None), ("lookup_order", None)))
    outcome = run("argument_equals", {"tool": "lookup_order", "argument": "order_id",
                                      "value": "A1"}, uncaptured)  # fmt: skip
    assert outcome == CheckOutcome.undecided(
        "Arguments of lookup_order were neither captured nor comparable by fingerprint."
    )
    forbidden = run("tool_not_called", {"tool": "lookup_order", "args": {"order_id": "A1"}},
                    uncaptured)  # fmt: skip
    assert forbidden.passed is None and "neither captured nor" in forbidden.reason
    assert (
        run("tool_not_called", {"tool": "lookup_order"}, uncaptured).passed is False
    )  # name known
    repeated = run("no_repeated_call", {}, uncaptured)
    assert repeated.passed is None and "not captured" in repeated.reason  # PG107 cannot decide


@pytest.mark.parametrize("name", sorted(EXPECTED_CATALOGUE))
def test_each_check_decides_its_fixtures_alike_on_default_privacy_settings(name: str) -> None:
    """Nothing captured, only the collector's facts: the same verdicts, argument values
    compared by fingerprint with the tenant's key."""
    check, key = CHECKS[name], FactSecret(b"k" * 32).for_tenant("default")
    for fixture, passed in ((check.passing, True), (check.failing, False)):
        params = check.params.model_validate(fixture.params)
        redacted = fixture.attempt.evidence(key)
        assert all(not c.span.genai.tool_arguments for c in redacted.view.tool_calls)
        assert check.run(params, redacted).passed is passed, (name, passed)


def test_uncaptured_arguments_compare_by_fingerprint_only_with_the_key() -> None:
    key = FactSecret(b"k" * 32).for_tenant("default")
    lookup = FixtureAttempt(calls=(("lookup_order", {"order_id": "A1002", "email": "a@b.io"}),))
    wanted = {"tool": "lookup_order", "argument": "order_id", "value": "A1002"}
    check = CHECKS["argument_equals"]
    params = check.params.model_validate
    assert check.run(params(wanted), lookup.evidence(key)).passed
    other = check.run(params({**wanted, "value": "A1001"}), lookup.evidence(key))
    assert other.reason == (
        "lookup_order was called with another order_id (compared by fingerprint: not "
        "captured), expected order_id='A1001'."
    )  # the value itself was never stored
    missing = check.run(params({**wanted, "argument": "id"}), lookup.evidence(key)).reason
    assert missing == "lookup_order was called with no id (arguments: email, order_id), " \
        "expected id='A1002'."  # fmt: skip
    without_key = lookup.evidence(key)
    without_key = AttemptEvidence(without_key.view, without_key.context, without_key.answer,
                                  without_key.findings, without_key.enabled)  # fmt: skip
    assert check.run(params(wanted), without_key).passed is None  # no key: cannot compare
    scrubbed_email = check.run(params({**wanted, "argument": "email", "value": "a@b.io"}),
                               lookup.evidence(key))  # fmt: skip
    assert scrubbed_email.passed  # fingerprints are taken before scrubbing
    forbidden = CHECKS["tool_not_called"]
    made = forbidden.params.model_validate({"tool": "lookup_order", "args": {"order_id": "A1002"}})
    assert forbidden.run(made, lookup.evidence(key)).passed is False
    near = FixtureAttempt(calls=(("issue_refund", {"amount": 20.004}),))
    within = params({"tool": "issue_refund", "argument": "amount", "value": 20, "tolerance": 0.01})
    assert check.run(within, near.evidence()).passed  # the captured value is within
    assert check.run(within, near.evidence(key)).passed is None  # a fingerprint proves only =


def test_detectors_quiet_reads_the_policys_findings_and_fails_closed() -> None:
    evidence = FixtureAttempt(finish_reason="length").evidence()
    quiet = CHECKS["detectors_quiet"]
    assert quiet.run(quiet.params.model_validate({"codes": ["PG101"]}), evidence).passed
    disabled = AttemptEvidence(evidence.view, evidence.context, evidence.answer,
                               evidence.findings, evidence.enabled - {"PG101"})  # fmt: skip
    outcome = quiet.run(quiet.params.model_validate({"codes": ["PG101"]}), disabled)
    assert outcome == CheckOutcome.undecided("PG101 not enabled by the policy.")
    with pytest.raises(ValidationError, match="unknown detector 'PG999'"):
        quiet.params.model_validate({"codes": ["PG999"]})


def test_budget_cost_comes_from_the_price_table_and_an_unpriced_model_cannot_decide() -> None:
    priced = FixtureAttempt(tokens=(1_000_000, 0))  # 1M input tokens of gpt-4o-mini
    price = priced.evidence().context.prices.price_of("gpt-4o-mini", "openai")
    assert price is not None
    assert run("budget", {"max_cost_usd": price.input_usd_per_mtok}, priced).passed
    assert not run("budget", {"max_cost_usd": price.input_usd_per_mtok * 0.99}, priced).passed
    unpriced = run("budget", {"max_cost_usd": 1.0}, FixtureAttempt(model="house-model-7"))
    assert unpriced.passed is None and "house-model-7" in unpriced.reason


def test_declarations_are_flat_validated_by_their_check_and_round_trip() -> None:
    spec = CheckSpec.model_validate({"check": "answer_json", "schema": {"type": "object"}})
    assert spec.model_dump() == {"check": "answer_json", "schema": {"type": "object"}}
    with pytest.raises(ValidationError, match=r"check 'ordering': after: Field required"):
        CheckSpec.model_validate({"check": "ordering", "before": "a"})
    with pytest.raises(ValidationError, match="unknown check 'orderin'"):
        CheckSpec.model_validate({"check": "orderin"})
    with pytest.raises(ValidationError, match="give `pattern` or `key`, not both"):
        CheckSpec.model_validate(
            {"check": "answer_number", "expected": 1, "pattern": "x", "key": "k"}
        )


def test_run_checks_combines_the_declarations_of_one_check() -> None:
    specs = [
        CheckSpec.model_validate({"check": "answer_regex", "pattern": "A"}),
        CheckSpec.model_validate({"check": "answer_regex", "pattern": "B"}),
        CheckSpec.model_validate({"check": "tool_called", "tool": "t"}),
    ]
    outcomes = run_checks(specs, FixtureAttempt(answer="A", calls=(("t", {}),)).evidence())
    assert outcomes == {
        "answer_regex": CheckOutcome.fail("The final answer has no match of /B/."),
        "tool_called": CheckOutcome.ok(),
    }


def test_all_of_is_a_three_valued_and() -> None:
    ok, bad, unknown = CheckOutcome.ok(), CheckOutcome.fail("x"), CheckOutcome.undecided("y")
    assert all_of([ok, ok]) == ok and all_of([]) == ok
    assert all_of([ok, unknown]) == unknown
    assert all_of([unknown, bad, ok]) == bad  # a failure decides whatever is undecided


def test_fixtures_run_through_the_production_detectors() -> None:
    trace = FixtureAttempt(calls=(("lookup_order", {"order_id": "A1"}),)).trace()
    assert run_detectors(trace, default_policy().resolve()) == []  # a clean turn
