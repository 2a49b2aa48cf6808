"""Tests of the detectors' shared pieces (TraceView indexes, finding keys, run_detectors)
and of the registry's shape."""

from __future__ import annotations

import dataclasses

import pytest
from pathgrade.detectors import REGISTRY, Finding, default_policy, run_detectors
from pathgrade.detectors.catalogue import render
from pathgrade.detectors.conventions import Conventions, ToolEffects
from pathgrade.detectors.registry import Params, RuleDoc
from pathgrade.detectors.view import TraceView

from tests.support.paths import REPO_ROOT
from tests.support.traces import TraceBuilder, clean_refund_trace, detect


def test_clean_trace_has_ten_spans_and_no_findings_under_default_policy() -> None:
    trace = clean_refund_trace()
    assert len(trace.spans) == 10
    assert run_detectors(trace, default_policy().resolve()) == []


def test_view_parses_arguments_and_resolves_effect_policy_first() -> None:
    b = TraceBuilder()
    b.tool("issue_refund", {"amount": 5}, effect="read")
    b.tool("lookup", None)
    conventions = Conventions(tools=ToolEffects(writes=frozenset({"issue_refund"})))
    refund, lookup = TraceView(b.build(), conventions).tool_calls
    assert refund.arguments == {"amount": 5} and refund.effect == "write" and refund.is_write
    assert lookup.arguments is None and lookup.signature is None and lookup.effect is None


def test_signature_ignores_key_order_and_idempotency_argument() -> None:
    b = TraceBuilder()
    b.tool("change_plan", {"plan": "gold", "account_id": "a", "idempotency_key": "1"})
    b.tool("change_plan", {"account_id": "a", "plan": "gold", "idempotency_key": "2"})
    first, second = TraceView(b.build(), Conventions()).tool_calls
    assert first.signature == second.signature
    assert (first.idempotency_key, second.idempotency_key) == ("1", "2")


def test_final_answer_is_empty_when_last_model_output_requests_tools() -> None:
    b = TraceBuilder(answer=None)
    b.chat(calls=[("c1", "lookup")])
    assert TraceView(b.build(), Conventions()).final_answer == ""
    assert TraceView(TraceBuilder(answer=None).build(), Conventions()).final_answer is None


def test_finding_key_is_stable_when_trace_grows_but_differs_across_problems() -> None:
    def loop_finding(repeats: int) -> Finding:
        b = TraceBuilder()
        for _ in range(repeats):
            b.tool("search", {"q": "x"})
        (finding,) = detect("PG107", b.build())
        return finding

    four, five = loop_finding(4), loop_finding(5)
    assert four.details["count"] != five.details["count"]
    assert four.key == five.key
    b = TraceBuilder()
    for _ in range(4):
        b.tool("search", {"q": "y"})
    assert detect("PG107", b.build())[0].key != four.key


def test_every_rule_is_documented_and_named_in_kebab_case() -> None:
    assert len(REGISTRY) == 23
    for code, rule in REGISTRY.items():
        assert code == rule.code and code.startswith("PG1")
        assert rule.name == rule.name.lower() and " " not in rule.name
        assert len(rule.doc.summary) > 80 and rule.reads


def test_catalogue_documents_every_rule() -> None:
    catalogue = (REPO_ROOT / "docs" / "detectors.md").read_text()
    for code, rule in REGISTRY.items():
        assert f"## {code} `{rule.name}` ({rule.severity})" in catalogue
        assert f"`{rule.policy_key}`" in catalogue


def test_catalogue_is_generated_from_the_registry() -> None:
    committed = (REPO_ROOT / "docs" / "detectors.md").read_text()
    assert committed == render(), (
        "docs/detectors.md differs from the registry: run "
        "`python -m pathgrade.cli.reference --write`"
    )


def _params_models(model: type[Params]) -> list[type[Params]]:
    """`model` and the params models nested in its fields' annotations."""
    found = [model]
    for info in model.model_fields.values():
        stack = list(getattr(info.annotation, "__args__", ()))
        while stack:
            item = stack.pop()
            if isinstance(item, type) and issubclass(item, Params):
                found += _params_models(item)
            stack += getattr(item, "__args__", ())
    return found


def test_every_params_field_carries_a_description() -> None:
    undescribed = [
        f"{rule.code} {model.__name__}.{name}"
        for rule in REGISTRY.values()
        for model in _params_models(rule.params)
        for name, info in model.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert undescribed == []


def test_every_current_rule_is_stable_and_a_doc_section_cannot_be_empty() -> None:
    preview = {"PG119", "PG120", "PG121", "PG122"}  # the hand-off rules (issue 44)
    assert {code for code, rule in REGISTRY.items() if rule.stability == "preview"} == preview
    assert {rule.stability for code, rule in REGISTRY.items() if code not in preview} == {"stable"}
    sections = dataclasses.asdict(REGISTRY["PG101"].doc)
    with pytest.raises(ValueError, match=r"RuleDoc\.fires is empty"):
        RuleDoc(**{**sections, "fires": " "})
