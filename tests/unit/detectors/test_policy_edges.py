"""The policy at its edges: which findings alert per tier, a tier's settings over the
defaults, request patterns checked and kept, the version a file may omit, its monitors
section, a loaded policy unchangeable, and every error naming the line of the value it
concerns (a list item, a key the file has, a document that is not a mapping)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pathgrade.detectors import PolicyError, default_policy, load_policy
from pathgrade.detectors.finding import Finding
from pathgrade.detectors.monitor_policy import MonitorsPolicy


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def finding(code: str, kind: str) -> Finding:
    return Finding(code, "n", "high", kind, "r", "t" * 32, "s" * 16)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tier", "code", "kind", "alerts"),
    [
        ("low", "PG101", "violation", True),
        ("medium", "PG101", "violation", True),
        ("high", "PG111", "cannot_decide", True),  # a check the high tier requires
        ("high", "PG101", "cannot_decide", False),  # not required: a coverage gap
        ("medium", "PG111", "cannot_decide", False),  # required, but only high alerts gaps
        ("low", "PG111", "cannot_decide", False),
    ],
)
def test_which_findings_alert(tier: str, code: str, kind: str, alerts: bool) -> None:
    resolved = default_policy().resolve("svc", "agent", tier)  # type: ignore[arg-type]
    assert resolved.should_alert(finding(code, kind)) is alerts


def test_a_tier_s_settings_override_the_defaults_and_a_service_s_the_tier_s(
    tmp_path: Path,
) -> None:
    policy = load_policy(
        write(
            tmp_path,
            "version: 1\n"
            "defaults:\n  loop: {max_repeats: 5}\n"
            "tiers:\n  high:\n    loop: {max_repeats: 2}\n"
            "services:\n  svc:\n    loop: {max_repeats: 4}\n",
        )
    )
    assert policy.resolve("other", "", "high").params["PG107"].max_repeats == 2
    assert policy.resolve("other", "", "low").params["PG107"].max_repeats == 5
    assert policy.resolve("svc", "", "high").params["PG107"].max_repeats == 4


def test_request_patterns_are_kept_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    kept = load_policy(
        write(tmp_path, "version: 1\ndefaults:\n  requests:\n    refund: [refund]\n")
    )
    assert kept.resolve().conventions.requests == {"refund": ("refund",)}
    assert load_policy(write(tmp_path, "version: 1\n")).resolve().conventions.requests == {}
    with pytest.raises(PolicyError, match=r"policy.yaml:3: defaults.requests: .*'\('"):
        load_policy(write(tmp_path, "version: 1\ndefaults:\n  requests:\n    refund: ['(']\n"))


def test_a_policy_without_a_version_is_version_1(tmp_path: Path) -> None:
    assert load_policy(write(tmp_path, "defaults: {}\n")).document.version == 1


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("version: 1\ndefaults:\n  enable:\n    - PG101\n    - NOPE\n", "5: defaults.enable.1"),
        ("version: 1\n# a note\ntiers:\n  extreme: {}\n", "4: tiers.extreme.[key]"),
        ("- 1\n- 2\n", "1: <root>"),
    ],
    ids=["list-item", "nearest-key-in-the-file", "not-a-mapping"],
)
def test_an_error_names_the_line_of_what_it_concerns(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(PolicyError) as error:
        load_policy(write(tmp_path, text))
    assert str(error.value).startswith(f"policy.yaml:{where}: ")


def test_a_policy_s_monitors_are_its_section_or_an_empty_one_and_it_cannot_change(
    tmp_path: Path,
) -> None:
    declared = load_policy(write(tmp_path, "version: 1\nmonitors:\n  every_s: 30\n"))
    assert (declared.monitors.every_s, declared.monitors.all()) == (30, [])
    assert load_policy(write(tmp_path, "version: 1\n")).monitors == MonitorsPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        declared.prices = default_policy().prices  # type: ignore[misc]
