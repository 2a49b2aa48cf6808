"""Detector metrics, the `sound` verdict and efficiency of one attempt."""

from __future__ import annotations

import itertools

import pytest
from pathgrade.batch_plane.scoring.checks import CHECKS, CheckOutcome
from pathgrade.batch_plane.scoring.checks.fixtures import FixtureAttempt
from pathgrade.batch_plane.scoring.path_metrics import (
    SOUND_PARTS,
    detector_outcomes,
    efficiency,
    sound,
)
from pathgrade.content.fingerprints import FactSecret
from pathgrade.detectors import REGISTRY, default_policy, run_detectors

from tests.support.traces import TraceBuilder

SOUND_CODES = [code for codes in SOUND_PARTS.values() for code in codes]
OUTCOMES = (CheckOutcome.ok(), CheckOutcome.fail("broke"), CheckOutcome.undecided("unknown"))


def outcomes_of(trace: object) -> dict[str, CheckOutcome]:
    policy = default_policy().resolve()
    return detector_outcomes(run_detectors(trace, policy), policy.params)  # type: ignore[arg-type]


def test_one_metric_per_enabled_detector_from_the_production_findings() -> None:
    orphan = TraceBuilder(turn_kind="read")
    orphan.chat(text="Your order shipped.")
    orphan.tool("open_ticket", {"order_id": "A1"}, effect="write")
    outcomes = outcomes_of(orphan.build())
    assert set(outcomes) == set(REGISTRY)  # the default policy enables every detector
    assert outcomes["PG110"] == CheckOutcome.fail(
        "Write open_ticket on a 'read' turn, not an action turn."
    )
    assert outcomes["PG117"].passed is None  # no captured content before the write
    assert outcomes["PG101"] == CheckOutcome.ok()
    assert sound(outcomes).passed is False
    assert sound(outcomes).reason.startswith("no_orphan_write (PG110): Write open_ticket")


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_detector_metrics_and_sound_decide_alike_on_default_privacy_settings(name: str) -> None:
    """Each catalogue fixture attempt, captured and as the collector stores it by default
    (facts only): every detector metric, and so `sound`, has the same verdict."""
    key = FactSecret(b"k" * 32).for_tenant("default")
    for fixture in (CHECKS[name].passing, CHECKS[name].failing):
        captured, redacted = fixture.attempt.evidence(), fixture.attempt.evidence(key)
        verdicts = [
            {code: o.passed for code, o in detector_outcomes(e.findings, e.enabled).items()}
            for e in (captured, redacted)
        ]
        assert verdicts[0] == verdicts[1], name
        assert None not in (verdicts[1][code] for code in SOUND_CODES), name  # all decide
        sounds = [sound(detector_outcomes(e.findings, e.enabled)) for e in (captured, redacted)]
        assert sounds[0] == sounds[1]


def test_sound_covers_the_four_atom_rules_and_the_four_path_rules() -> None:
    assert set(SOUND_PARTS) == {
        "right_tool", "arguments_from_request", "in_bounds", "identity_scoped",
        "at_most_one_write", "no_orphan_write", "terminated", "within_budget",
    }  # fmt: skip
    assert set(SOUND_CODES) <= set(REGISTRY) and len(SOUND_CODES) == len(set(SOUND_CODES))


@pytest.mark.parametrize("seed", range(40))
def test_sound_is_exactly_the_three_valued_and_of_its_parts(seed: int) -> None:
    """Random outcomes for every detector: sound depends on its parts' outcomes only."""
    cycle = itertools.cycle(OUTCOMES[seed % 3 :] + OUTCOMES[: seed % 3])
    skip = seed % 7
    detectors = {code: next(cycle) for code in sorted(REGISTRY) for _ in range(skip % 2 + 1)}
    parts = [detectors[code].passed for code in SOUND_CODES]
    expected = False if False in parts else None if None in parts else True
    assert sound(detectors).passed is expected
    others = {code: CheckOutcome.fail("x") for code in REGISTRY if code not in SOUND_CODES}
    assert sound({**detectors, **others}).passed is expected  # nothing else counts


def test_sound_of_clean_parts_passes_and_a_disabled_part_cannot_decide() -> None:
    clean = {code: CheckOutcome.ok() for code in SOUND_CODES}
    assert sound(clean) == CheckOutcome.ok()
    without = {code: o for code, o in clean.items() if code != "PG112"}
    assert sound(without) == CheckOutcome.undecided(
        "identity_scoped (PG112): PG112 (identity-scope) is not enabled by the policy."
    )


def test_efficiency_counts_calls_and_tokens_and_prices_them() -> None:
    attempt = FixtureAttempt(calls=(("a", {}), ("b", {})), tokens=(1000, 500), latency_ms=1500)
    evidence = attempt.evidence()
    price = evidence.context.prices.price_of("gpt-4o-mini", "openai")
    assert price is not None
    measured = efficiency(evidence.view, evidence.context)
    assert measured == {
        "tool_calls": 2.0,
        "tokens": 1500.0,
        "cost_usd": pytest.approx(
            (1000 * price.input_usd_per_mtok + 500 * price.output_usd_per_mtok) / 1e6
        ),
        "latency_s": 1.5,
    }
    unpriced = FixtureAttempt(model="house-model-7").evidence()
    assert efficiency(unpriced.view, unpriced.context)["cost_usd"] is None
