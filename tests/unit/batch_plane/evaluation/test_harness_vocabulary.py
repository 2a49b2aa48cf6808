"""The harness vocabulary (`{"type": "called", ...}`): the example cases written that way
import, and score exactly as the same checks written with the catalogue's names on the
same traces of every seeded-defect build; a declaration that names neither vocabulary's
key is refused with the key expected, the key found and the nearest known name."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.agents.adapters import TurnContext, adapter_for
from pathgrade.batch_plane.evaluation.datasets import DatasetError, DatasetItem, parse_items
from pathgrade.batch_plane.evaluation.runs import Attempt, attempt_evidence
from pathgrade.batch_plane.scoring.checks import CheckSpec, run_checks
from pathgrade.batch_plane.scoring.checks.harness import HARNESS_TYPES
from pathgrade.content.otlp import decode_spans_message
from pathgrade.detectors import load_policy
from pathgrade.schemas.model import EvalContext, Trace

from examples.seeded_defects.agent import BUILDS
from tests.support.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "seeded_defects"
CATALOGUE_TWINS = {
    "order-1": [
        {"check": "tool_called", "tool": "lookup_order"},
        {"check": "tool_not_called", "tool": "open_ticket"},
        {"check": "argument_equals", "tool": "lookup_order", "argument": "order_id",
         "value": "A1001"},
        {"check": "no_repeated_call"},
        {"check": "answer_regex", "pattern": "ORD-", "present": False},
        {"check": "budget", "max_steps": 1, "max_cost_usd": 0.001},
    ],
    "refund-1": [
        {"check": "tool_called", "tool": "issue_refund"},
        {"check": "tool_not_called", "tool": "open_ticket"},
        {"check": "argument_equals", "tool": "issue_refund", "argument": "order_id",
         "value": "A2001"},
        {"check": "ordering", "before": "request_confirmation", "after": "issue_refund"},
        {"check": "no_repeated_call"},
        {"check": "answer_regex", "pattern": r"\bORD-\d{6}\b", "present": True},
        {"check": "budget", "max_steps": 1, "max_cost_usd": 0.001},
    ],
    "kb-1": [
        {"check": "tool_called", "tool": "search_kb"},
        {"check": "tool_not_called", "tool": "open_ticket"},
        {"check": "answer_regex", "pattern": "reset button"},
        {"check": "budget", "max_steps": 1, "max_cost_usd": 0.001},
    ],
    "plan-1": [
        {"check": "tool_called", "tool": "change_plan"},
        {"check": "argument_equals", "tool": "change_plan", "argument": "plan",
         "value": "premium"},
        {"check": "ordering", "before": "request_confirmation", "after": "change_plan"},
        {"check": "no_repeated_call"},
    ],
}  # fmt: skip
"""The example's checks as the catalogue writes them (by hand, not from the alias table)."""
CONTEXT = TurnContext(EvalContext(run_id="harness", dataset_item_id="", replay_index=0))
CAUGHT = {
    ("renamed_argument", "order-1", "argument_equals"),
    ("skipped_confirmation", "refund-1", "ordering"),
    ("skipped_confirmation", "plan-1", "ordering"),
    ("stale_index", "kb-1", "answer_regex"),
    ("eager_ticket", "order-1", "tool_not_called"),
    ("plan_guard", "plan-1", "tool_called"),
    ("plan_guard", "plan-1", "argument_equals"),
    ("placeholder_reference", "refund-1", "answer_regex"),
}
"""The (build, item, check) failures the example catches: every defect the checks see."""


@pytest.fixture(scope="module")
def exported() -> Iterator[InMemorySpanExporter]:
    """The agent's spans (it traces through the global provider), kept in memory."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def traced_attempt(
    exporter: InMemorySpanExporter, build: str, item: DatasetItem
) -> tuple[Attempt, Trace]:
    """Run one build on one item; its Attempt and canonical Trace (SDK spans through the
    OTLP encoder and pathgrade's decoder, as the collector and the store see them)."""
    exporter.clear()
    attempt = Attempt(item, 0)
    attempt.turn = adapter_for(BUILDS[build], build).respond({}, item.user_message, CONTEXT)
    message = encode_spans(exporter.get_finished_spans()).SerializeToString()
    spans = decode_spans_message(message, "default", time.time_ns())
    return attempt, Trace("default", spans[0].trace_id, spans)


def test_the_harness_example_imports_and_reads_as_the_catalogues_checks() -> None:
    items = parse_items((EXAMPLE / "harness_cases.jsonl").read_text(), "harness_cases.jsonl")
    used = {type_ for item in items for type_ in _harness_types(item.item_id)}
    assert used == set(HARNESS_TYPES)  # every type of the vocabulary appears
    for item in items:
        twin = [CheckSpec.model_validate(spec) for spec in CATALOGUE_TWINS[item.item_id]]
        assert item.checks == twin
        assert [spec.model_dump() for spec in item.checks] == CATALOGUE_TWINS[item.item_id]


def _harness_types(item_id: str) -> set[str]:
    lines = (EXAMPLE / "harness_cases.jsonl").read_text().splitlines()
    item = next(json.loads(line) for line in lines if json.loads(line)["item_id"] == item_id)
    return {check["type"] for check in item["checks"]}


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_harness_checks_score_as_the_catalogues_on_the_same_traces(
    exported: InMemorySpanExporter, build: str
) -> None:
    items = parse_items((EXAMPLE / "harness_cases.jsonl").read_text(), "harness_cases.jsonl")
    policy = load_policy(EXAMPLE / "policy.yaml").resolve()
    failed = set()
    for item in items:
        attempt, traced = traced_attempt(exported, build, item)
        evidence = attempt_evidence(attempt, traced, policy)
        twin = [CheckSpec.model_validate(spec) for spec in CATALOGUE_TWINS[item.item_id]]
        harness_outcomes = run_checks(item.checks, evidence)
        assert harness_outcomes == run_checks(twin, evidence), (build, item.item_id)
        assert set(harness_outcomes) == {spec.check for spec in twin}
        failed |= {(build, item.item_id, n) for n, o in harness_outcomes.items() if not o.passed}
    assert failed == {caught for caught in CAUGHT if caught[0] == build}


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"kind": "called", "tool": "x"},
         'no "check" key (found "kind": "called", "tool": "x"; did you mean "type": "called"?)'),
        ({"chek": "tool_called", "tool": "x"},
         'no "check" key (found "chek": "tool_called", "tool": "x"; did you mean '
         '"check": "tool_called"?)'),
        ({"type": "caled", "tool": "x"}, "unknown harness type 'caled' (did you mean 'called'?)"),
        ({"type": "tool_called", "tool": "x"},
         "unknown harness type 'tool_called': that is a catalogue name "
         '(write "check": "tool_called")'),
        ({"check": "not_called", "tool": "x"},
         "unknown check 'not_called': that is a harness type (write \"type\": \"not_called\", "
         'or "check": "tool_not_called")'),
        ({"check": "tool_caled", "tool": "x"},
         "unknown check 'tool_caled' (did you mean 'tool_called'?)"),
        ({"type": "arg", "tool": "t", "key": "k", "expect": 1},
         "check 'arg' (argument_equals): expected: Field required; found 'expect' instead; "
         "expect: unknown key (did you mean 'expected'?)"),
        ({"type": "arg", "tool": "t", "argument": "k", "expected": 1},
         "check 'arg': argument: unknown key (did you mean 'key'? 'argument' is the name "
         'under "check": "argument_equals")'),
        ({"type": "budget", "stepz": 3},
         "check 'budget' (budget): stepz: unknown key (did you mean 'steps'?)"),
        ({"check": "tool_called", "type": "called", "tool": "x"},
         'give "check" (a catalogue name) or "type" (a harness type), not both '
         '(found "check": "tool_called" and "type": "called")'),
    ],
)  # fmt: skip
def test_a_bad_declaration_names_the_key_expected_found_and_nearest(
    declared: dict, message: str
) -> None:
    line = f'{{"item_id": "a", "input": "q", "checks": [{json.dumps(declared)}]}}'
    with pytest.raises(DatasetError) as raised:
        parse_items(line, "cases.jsonl")
    assert raised.value.problems == [f"cases.jsonl:1: checks[0]: {message}"]


def test_an_unknown_item_key_names_the_nearest_and_a_missing_one_what_was_found() -> None:
    lines = ['{"item_id": "a", "input": "q", "chekcs": []}', '{"id": "b", "input": "q"}']
    with pytest.raises(DatasetError) as raised:
        parse_items("\n".join(lines), "cases.jsonl")
    assert raised.value.problems[0] == "cases.jsonl:1: chekcs: unknown key (did you mean 'checks'?)"
    assert raised.value.problems[1] == "cases.jsonl:2: item_id: Field required; found 'id' instead"
    assert raised.value.problems[2].startswith("cases.jsonl:2: id: unknown key (known: ")


def test_the_docs_list_each_harness_type_beside_its_catalogue_check() -> None:
    doc = (REPO_ROOT / "docs" / "datasets.md").read_text().split("### The harness vocabulary")[1]
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    for name, alias in HARNESS_TYPES.items():
        row = next((r for r in rows if r.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/datasets.md does not list harness type {name}"
        assert f"| `{alias.check}` |" in row, row
        for harness_key in alias.renamed:
            assert f"`{harness_key}`" in row, row
