"""The policy's `monitors:` section (`detectors.monitor_policy`): the documented defaults,
every bound accepted at its edge and refused past it with the field named, the checks
across monitors (unique names, known slices, whole buckets), the baseline's range, and the
counter each objective counts its bad turns with."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pathgrade.detectors.monitor_policy import (
    MONITOR_CODES,
    SRE_WINDOWS,
    DetectorRateMonitor,
    MonitorsPolicy,
    ObjectiveMonitor,
    ScoreMonitor,
    bad_counter,
    monitor_kind,
)
from pathgrade.schemas.rollups import INCOMPLETE, TOOL_ERROR
from pydantic import ValidationError

WEEK_S = 7 * 86_400
OBJECTIVE = {"name": "errors", "good": "no_tool_error", "objective": 0.99}
RATE = {"name": "retries", "detector": "PG108"}
SCORE = {"name": "faith", "metric": "faithfulness"}


def monitors(**section: Any) -> MonitorsPolicy:
    """The `monitors:` section of a policy file holding `section`."""
    return MonitorsPolicy.model_validate(section)


def refusal(**section: Any) -> str:
    """The error the section is refused with (it must be refused)."""
    with pytest.raises(ValidationError) as refused:
        monitors(**section)
    return str(refused.value)


def objective(**fields: Any) -> dict[str, Any]:
    return {**OBJECTIVE, **fields}


def rate(**fields: Any) -> dict[str, Any]:
    return {**RATE, **fields}


def score(**fields: Any) -> dict[str, Any]:
    return {**SCORE, **fields}


def window(**fields: Any) -> dict[str, Any]:
    return {"long_s": 3600, "short_s": 300, "burn_rate": 2.0, "severity": "high", **fields}


def test_the_defaults_are_the_documented_ones() -> None:
    """docs/monitors.md's tables: every setting a policy may leave out."""
    section = monitors(objectives=[OBJECTIVE], detector_rates=[RATE], scores=[score()])
    assert (
        section.every_s, section.bucket_s, section.settle_s, section.resolve_after_s,
        section.slices, section.confidence, section.resamples, section.examples,
    ) == (60, 60, 30, 300, [], 0.99, 5000, 5)  # fmt: skip
    (obj,), (det,), (sco,) = section.objectives, section.detector_rates, section.scores
    assert (obj.service, obj.agent, obj.slice, obj.min_turns) == (None, None, None, 20)
    assert [w.model_dump() for w in obj.windows] == [
        {"long_s": 3600, "short_s": 300, "burn_rate": 14.4, "severity": "critical"},
        {"long_s": 21600, "short_s": 1800, "burn_rate": 6.0, "severity": "high"},
    ]
    assert obj.windows == list(SRE_WINDOWS)
    assert (det.window_s, det.baseline_offset_s, det.severity) == (3600, WEEK_S, "high")
    assert (det.tolerance, det.min_turns, det.baseline_from, det.baseline_to) == (
        0.0, 100, None, None,
    )  # fmt: skip
    assert (sco.max_drop, sco.min_samples, sco.window_s) == (0.0, 30, 3600)


GT0, GE0, GE1 = "greater than 0", "greater than or equal to 0", "greater than or equal to 1"
EXTRA, PATTERN, WHOLE = "Extra inputs are not permitted", "pattern", "is not a whole number of"
PIN, AFTER = "set both to pin a baseline, or neither", "baseline_to must be after baseline_from"
BUDGET, DETECTOR = "budget: {} with good latency_under or cost_under", "detector: required with"
DAY1, DAY2, SECOND1 = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-01T00:00:01Z"


def objectives(*monitors: dict[str, Any], **section: Any) -> dict[str, Any]:
    return {"objectives": list(monitors), **section}


def windows(*pairs: dict[str, Any], **section: Any) -> dict[str, Any]:
    """A section with one objective of the burn-rate `pairs`."""
    return objectives(objective(windows=list(pairs)), **section)


# Each row: its name, the section, the field the error names ("" the section), what it says.
REFUSED = [
    ("every_s zero", {"every_s": 0}, "every_s", GT0),
    ("bucket_s zero", {"bucket_s": 0}, "bucket_s", GT0),
    ("settle_s negative", {"settle_s": -1}, "settle_s", GE0),
    ("resolve_after_s negative", {"resolve_after_s": -1}, "resolve_after_s", GE0),
    ("confidence zero", {"confidence": 0}, "confidence", GT0),
    ("confidence one", {"confidence": 1}, "confidence", "less than 1"),
    ("resamples 99", {"resamples": 99}, "resamples", "greater than or equal to 100"),
    ("examples negative", {"examples": -1}, "examples", GE0),
    ("examples 51", {"examples": 51}, "examples", "less than or equal to 50"),
    ("an unknown key", {"every": 60}, "every", EXTRA),
    ("a name in capitals", objectives(objective(name="Errors")), "objectives.0.name", PATTERN),
    ("a name of 64 characters", {"scores": [score(name="a" * 64)]}, "scores.0.name", PATTERN),
    ("a name starting with -", {"scores": [score(name="-a")]}, "scores.0.name", PATTERN),
    ("an unknown monitor key", {"scores": [score(threshold=1)]}, "scores.0.threshold", EXTRA),
    ("objective 0", objectives(objective(objective=0)), "objectives.0.objective", GT0),
    ("objective 1", objectives(objective(objective=1)), "objectives.0.objective", "less than 1"),
    ("no window", windows(), "objectives.0.windows", "at least 1 item"),
    ("min_turns 0", objectives(objective(min_turns=0)), "objectives.0.min_turns", GE1),
    ("budget 0", objectives(objective(good="cost_under", budget=0)), "objectives.0.budget", GT0),
    ("a stray budget", objectives(objective(budget=1.0)), "objectives.0", BUDGET.format("only")),
    ("latency_under alone", objectives(objective(good="latency_under")), "objectives.0",
     BUDGET.format("required")),
    ("cost_under alone", objectives(objective(good="cost_under")), "objectives.0",
     BUDGET.format("required")),
    ("no_finding alone", objectives(objective(good="no_finding")), "objectives.0",
     DETECTOR + " good no_finding"),
    ("a stray detector", objectives(objective(detector="PG108")), "objectives.0",
     DETECTOR + " good no_finding, and only with it"),
    ("long_s 0", windows(window(long_s=0)), "objectives.0.windows.0.long_s", GT0),
    ("short_s 0", windows(window(short_s=0)), "objectives.0.windows.0.short_s", GT0),
    ("burn_rate 0", windows(window(burn_rate=0)), "objectives.0.windows.0.burn_rate", GT0),
    ("short_s = long_s", windows(window(short_s=3600)), "objectives.0.windows.0",
     "short_s must be shorter than long_s"),
    ("short_s > long_s", windows(window(short_s=7200)), "objectives.0.windows.0", "shorter"),
    ("a window's unknown key", windows(window(page=1)), "objectives.0.windows.0.page", EXTRA),
    ("window_s 0", {"detector_rates": [rate(window_s=0)]}, "detector_rates.0.window_s", GT0),
    ("baseline_offset_s 0", {"detector_rates": [rate(baseline_offset_s=0)]},
     "detector_rates.0.baseline_offset_s", GT0),
    ("tolerance < 0", {"detector_rates": [rate(tolerance=-0.1)]}, "detector_rates.0.tolerance",
     GE0),
    ("tolerance > 1", {"detector_rates": [rate(tolerance=1.1)]}, "detector_rates.0.tolerance",
     "less than or equal to 1"),
    ("a rate's min_turns 0", {"detector_rates": [rate(min_turns=0)]},
     "detector_rates.0.min_turns", GE1),
    ("max_drop < 0", {"scores": [score(max_drop=-0.1)]}, "scores.0.max_drop", GE0),
    ("min_samples 0", {"scores": [score(min_samples=0)]}, "scores.0.min_samples", GE1),
    ("baseline_from alone", {"scores": [score(baseline_from=DAY1)]}, "scores.0", PIN),
    ("baseline_to alone", {"scores": [score(baseline_to=DAY1)]}, "scores.0", PIN),
    ("a pinned baseline of no time", {"scores": [score(baseline_from=DAY1, baseline_to=DAY1)]},
     "scores.0", AFTER),
    ("a pinned baseline backwards", {"scores": [score(baseline_from=DAY2, baseline_to=DAY1)]},
     "scores.0", AFTER),
    ("names repeated", {**objectives(objective(name="x"), objective(name="x")),
                        "scores": [score(name="y"), score(name="y")]},
     "", "monitor names must be unique: x, y repeated"),
    ("a name repeated across kinds", {**objectives(objective(name="x")),
                                      "scores": [score(name="x")]},
     "", "monitor names must be unique: x repeated"),
    ("service as a slice", {"slices": ["service"]}, "", "slices: service and agent are always"),
    ("agent as a slice", {"slices": ["app.intent", "agent"]}, "", "service and agent are always"),
    ("an unknown slice", {"slices": ["app.intent"], "scores": [score(slice="app.tier")]}, "",
     "faith: slice 'app.tier' is neither service, agent nor in monitors.slices"),
    ("a window of part of a bucket", {"detector_rates": [rate(window_s=90)]}, "",
     "retries: a window of 90 s is not a whole number of buckets of 60 s"),
    ("a long window of part of a bucket", windows(window(long_s=3650), bucket_s=300), "",
     "errors: a window of 3650 s " + WHOLE),
    ("a short window of part of a bucket", windows(window(short_s=150), bucket_s=300), "",
     "errors: a window of 150 s " + WHOLE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("section", "field", "says"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_bad_settings_are_refused_naming_the_field_and_the_reason(
    section: dict[str, Any], field: str, says: str
) -> None:
    error = refusal(**section)
    assert says in error
    if field:
        assert f"\n{field}\n" in error


# Each row: a section at the edge of the bounds the rows above refuse just past it.
ACCEPTED = {
    "the smallest settings": {"every_s": 1, "bucket_s": 1, "settle_s": 0, "resolve_after_s": 0,
                              "resamples": 100, "examples": 0},
    "the largest examples": {"examples": 50},
    "a name of 63 characters": {"scores": [score(name="a" * 63)]},
    "every character a name may have": {"scores": [score(name="0a_.-9")]},
    "the tightest objective": windows(window(long_s=2, short_s=1, burn_rate=0.1), bucket_s=1),
    "the loosest objective": objectives(objective(objective=0.5, min_turns=1)),
    "each good with what it needs": objectives(
        objective(name="a", good="complete"),
        objective(name="b", good="no_finding", detector="PG108"),
        objective(name="c", good="latency_under", budget=0.5),
        objective(name="d", good="cost_under", budget=0.01),
    ),
    "the bounds of a rate": {"detector_rates": [
        rate(name="lo", tolerance=0, min_turns=1, window_s=60, baseline_offset_s=1),
        rate(name="hi", tolerance=1),
    ]},
    "the bounds of a score": {"scores": [score(max_drop=0, min_samples=1)]},
    "a pinned baseline": {"scores": [score(baseline_from=DAY1, baseline_to=SECOND1)]},
    "a slice of each kind": {"slices": ["app.intent"], "scores": [
        score(name="a", slice="app.intent"), score(name="b", slice="service"),
        score(name="c", slice="agent"),
    ]},
    "windows of whole buckets": {
        **windows(window(long_s=3600, short_s=600), bucket_s=300),
        "detector_rates": [rate(window_s=1800)],
    },
}  # fmt: skip


@pytest.mark.parametrize("section", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_settings_at_the_edge_of_their_bounds_are_accepted(section: dict[str, Any]) -> None:
    assert isinstance(monitors(**section), MonitorsPolicy)


def test_a_window_is_compared_with_the_baseline_a_week_before_or_the_pinned_one() -> None:
    start, end = 2_000_000_000, 2_000_003_600
    offset = DetectorRateMonitor.model_validate(rate())
    assert offset.baseline_range(start, end) == (start - WEEK_S, end - WEEK_S)
    moved = ScoreMonitor.model_validate(score(baseline_offset_s=86_400))
    assert moved.baseline_range(start, end) == (start - 86_400, end - 86_400)
    zoned = ScoreMonitor.model_validate(
        score(baseline_from="2026-01-01T00:00:00Z", baseline_to="2026-01-02T00:00:00Z")
    )
    assert zoned.baseline_range(start, end) == (1_767_225_600, 1_767_312_000)


@pytest.mark.parametrize(
    ("good", "detector", "budget", "counter"),
    [
        ("complete", None, None, INCOMPLETE),
        ("no_tool_error", None, None, TOOL_ERROR),
        ("no_finding", "PG108", None, "finding:PG108"),
        ("latency_under", None, 2.5, "latency_over:2.5"),
        ("cost_under", None, 0.05, "cost_over:0.05"),
    ],
)
def test_each_objective_counts_its_bad_turns_with_its_counter(
    good: str, detector: str | None, budget: float | None, counter: str
) -> None:
    fields = {"good": good, "detector": detector, "budget": budget}
    monitor = ObjectiveMonitor.model_validate(objective(**fields))
    assert monitor.bad_counter == counter == bad_counter(good, detector, budget)  # type: ignore[arg-type]


def test_an_objectives_error_budget_and_a_rates_counter() -> None:
    assert ObjectiveMonitor.model_validate(objective(objective=0.99)).error_budget == pytest.approx(
        0.01
    )
    assert (
        DetectorRateMonitor.model_validate(rate(detector="retry-storm")).counter == "finding:PG108"
    )


def test_every_monitor_objectives_first_with_its_kind_and_alert_code() -> None:
    slow = objective(name="slow", good="latency_under", budget=2.0)
    dear = objective(name="dear", good="cost_under", budget=0.5)
    section = monitors(
        scores=[score()], detector_rates=[rate()], objectives=[objective(), slow, dear]
    )
    kinds = [monitor_kind(m) for m in section.all()]
    assert [m.name for m in section.all()] == ["errors", "slow", "dear", "retries", "faith"]
    assert kinds == ["objective"] * 3 + ["detector_rate", "score"]
    assert [MONITOR_CODES[k] for k in kinds[2:]] == ["PG200", "PG201", "PG202"]
    assert (section.latency_budgets(), section.cost_budgets()) == ({2.0}, {0.5})


def test_a_pinned_baseline_reads_a_time_without_zone_as_utc() -> None:
    naive = ScoreMonitor.model_validate(
        score(baseline_from=dt.datetime(2026, 1, 1), baseline_to=dt.datetime(2026, 1, 1, 1))
    )
    assert naive.baseline_range(0, 1) == (1_767_225_600, 1_767_229_200)


def test_a_pinned_baseline_with_and_without_a_zone_is_compared_as_utc() -> None:
    """A time without zone is UTC, also beside one with a zone (it raised TypeError)."""
    mixed = score(baseline_from="2026-01-01T00:00:00", baseline_to="2026-01-01T02:00:00+01:00")
    assert ScoreMonitor.model_validate(mixed).baseline_range(0, 1) == (1_767_225_600, 1_767_229_200)
    backwards = score(baseline_from="2026-01-01T01:00:00", baseline_to="2026-01-01T01:30:00+01:00")
    with pytest.raises(ValidationError, match="baseline_to must be after baseline_from"):
        ScoreMonitor.model_validate(backwards)
