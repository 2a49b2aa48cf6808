"""The YAML policy: validation errors with lines, section merging, tiers, alerting."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from pathgrade.detectors import Finding, PolicyError, load_policy, run_detectors

from tests.support.traces import TraceBuilder

POLICY = """\
version: 1
defaults:
  tools:
    writes: [change_plan]
    irreversible: [cancel_order]
  budgets:
    max_tool_calls: 10
    max_steps: 20
  disable: [output-patterns]
tiers:
  high:
    required: [PG113]
services:
  billing:
    risk_tier: high
    budgets:
      max_tool_calls: 2
    ordering:
      - {before: lookup_order, after: issue_refund}
    agents:
      billing-agent:
        enable: [PG115]
        forbidden_tools: [drop_table]
"""


def write(tmp_path: Path, text: str, name: str = "policy.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_sections_merge_field_by_field(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, POLICY))
    billing = policy.resolve("billing", "billing-agent")
    assert billing.risk_tier == "high"
    budgets = billing.params["PG114"]
    assert (budgets.max_tool_calls, budgets.max_steps) == (2, 20)  # type: ignore[attr-defined]
    assert billing.params["PG102"].tools == {"drop_table"}  # type: ignore[attr-defined]
    assert "PG115" in billing.params and {"PG113", "PG111"} <= billing.required
    assert billing.conventions.tools.effect_of("cancel_order", None) == "irreversible"
    other = policy.resolve("support", "any")
    assert other.risk_tier == "medium" and "PG115" not in other.params
    assert other.params["PG114"].max_tool_calls == 10  # type: ignore[attr-defined]
    assert "PG113" not in other.required


def test_explicit_risk_tier_wins(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, POLICY))
    assert policy.resolve("billing", risk_tier="low").required == frozenset()


def test_errors_name_line_and_field(tmp_path: Path) -> None:
    bad = POLICY.replace("max_tool_calls: 2", "max_tool_calls: lots")
    with pytest.raises(PolicyError) as error:
        load_policy(write(tmp_path, bad))
    assert str(error.value) == (
        "policy.yaml:17: services.billing.budgets.max_tool_calls: "
        "Input should be a valid integer, unable to parse string as an integer"
    )


def test_unknown_keys_and_detectors_are_errors_with_lines(tmp_path: Path) -> None:
    bad = POLICY.replace("disable: [output-patterns]", "disable: [no-such-check]").replace(
        "  billing:\n", "  billing:\n    budgetz: {}\n"
    )
    with pytest.raises(PolicyError) as error:
        load_policy(write(tmp_path, bad))
    lines = str(error.value).splitlines()
    assert lines[0].startswith("policy.yaml:9: defaults.disable.0: Value error, unknown detector")
    assert lines[1] == "policy.yaml:15: services.billing.budgetz: Extra inputs are not permitted"


def test_invalid_yaml_and_regex_are_reported(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="invalid YAML"):
        load_policy(write(tmp_path, "defaults: [unclosed"))
    with pytest.raises(PolicyError, match=r"policy.yaml:3: .*forbidden_patterns: .*regular"):
        load_policy(
            write(tmp_path, "defaults:\n  output_patterns:\n    forbidden_patterns: ['(']\n")
        )


def test_price_table_path_is_relative_to_policy(tmp_path: Path) -> None:
    table = {
        "version": "v",
        "effective_date": "2026-01-01",
        "models": [
            {
                "provider": "acme",
                "model": "house",
                "input_usd_per_mtok": 1,
                "output_usd_per_mtok": 1,
            }
        ],
    }
    (tmp_path / "prices.json").write_text(json.dumps(table))
    policy = load_policy(write(tmp_path, "price_table: prices.json\n"))
    assert policy.resolve().prices.price_of("house") is not None


def test_required_checks_make_cannot_decide_alert(tmp_path: Path) -> None:
    b = TraceBuilder(turn_kind=None)
    b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
    trace = b.build()
    low = load_policy(None).resolve(risk_tier="low")
    high = load_policy(None).resolve(risk_tier="high")
    (undecided,) = [f for f in run_detectors(trace, low) if f.code == "PG110"]
    assert undecided.kind == "cannot_decide"
    assert not low.should_alert(undecided) and high.should_alert(undecided)


def test_severity_override_applies(tmp_path: Path) -> None:
    path = write(tmp_path, "defaults:\n  severity: {tool-error: critical}\n")
    b = TraceBuilder()
    b.tool("lookup", {}, error="Boom")
    findings: list[Finding] = run_detectors(b.build(), load_policy(path).resolve())
    assert [(f.code, f.severity) for f in findings if f.code == "PG101"] == [("PG101", "critical")]
