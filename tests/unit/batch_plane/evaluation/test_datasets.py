"""Datasets in a real embedded store: versions, immutability, JSONL, items from traces."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pathgrade.batch_plane.evaluation.datasets import (
    DatasetError,
    DatasetItem,
    Datasets,
    dump_items,
    item_from_trace,
    items_from_traces,
    parse_items,
    parse_ref,
    triage,
)
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.model import GenAIFields, Span, Trace

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)


def checks_of(item: DatasetItem) -> list[dict]:
    """An item's checks as JSONL writes them."""
    return [spec.model_dump() for spec in item.checks]


def items(*ids: str) -> list[DatasetItem]:
    return [
        DatasetItem(
            item_id=i,
            input={"user": f"question {i}"},
            reference_answer=f"answer {i}",
            expected_tool_calls=[{"name": "lookup_order", "args": {"order_id": i}}],
            slices={"intent": "order"},
            tags=["t"],
        )
        for i in ids
    ]


def stored_trace(trace_id: str = "ab" * 16) -> Trace:
    """A small support-agent trace: root, chat with messages, one tool call."""
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "where is A1?"}]}])
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "shipped"}]}])
    root = Span(
        "default",
        trace_id,
        "01" * 8,
        "",
        "invoke_agent support",
        "Internal",
        1_000,
        9_000,
        service_name="support-agent",
        genai=GenAIFields(operation="invoke_agent", conversation_id="conv-1"),
    )
    chat = Span(
        "default",
        trace_id,
        "02" * 8,
        root.span_id,
        "chat m",
        "Client",
        2_000,
        3_000,
        genai=GenAIFields(operation="chat", input_messages=user, output_messages=answer),
    )
    tool = Span("default", trace_id, "03" * 8, root.span_id, "execute_tool lookup_order",
                "Internal", 4_000, 5_000, attributes={"gen_ai.usage.input_tokens": 12},
                genai=GenAIFields(operation="execute_tool", tool_name="lookup_order",
                                  tool_arguments='{"order_id":"A1"}'))  # fmt: skip
    return Trace("default", trace_id, [root, chat, tool])


def test_create_add_publish_then_published_version_refuses_additions(store: ClientStore) -> None:
    datasets = Datasets(store)
    created = datasets.create("golden/lifecycle", "golden", "team-a", "support tasks")
    assert (created.version, created.status, created.items) == (1, "draft", 0)
    assert datasets.add("golden/lifecycle", items("a", "b")).items == 2
    published = datasets.publish("golden/lifecycle")
    assert published.status == "published" and published.published_at_ms is not None
    with pytest.raises(DatasetError, match=r"golden/lifecycle@1 is published and immutable"):
        datasets.add("golden/lifecycle@1", items("c"))
    assert [i.item_id for i in datasets.items("golden/lifecycle@1")] == ["a", "b"]


def test_create_on_a_published_name_starts_the_next_version_with_its_items(
    store: ClientStore,
) -> None:
    datasets = Datasets(store)
    datasets.create("golden/next", "golden", "team-a")
    datasets.add("golden/next", items("a"))
    datasets.publish("golden/next")
    second = datasets.create("golden/next", "golden", "team-a")
    assert (second.version, second.status, second.items) == (2, "draft", 1)
    datasets.add("golden/next", items("b"))
    assert datasets.resolve("golden/next", published=True).version == 1
    assert datasets.resolve("golden/next@1").items == 1
    assert datasets.items("golden/next@2") == items("a", "b")


def test_create_refuses_a_second_draft_a_bad_kind_and_publishing_nothing(
    store: ClientStore,
) -> None:
    datasets = Datasets(store)
    datasets.create("adv/x", "adversarial", "sec")
    with pytest.raises(DatasetError, match="already a draft"):
        datasets.create("adv/x", "adversarial", "sec")
    with pytest.raises(DatasetError, match="kind: 'weird' is not one of"):
        datasets.create("adv/y", "weird", "sec")
    with pytest.raises(DatasetError, match="has no items"):
        datasets.publish("adv/x")
    with pytest.raises(DatasetError, match="no such version"):
        datasets.resolve("adv/x@9")


def test_items_round_trip_through_jsonl_unchanged() -> None:
    original = items("x", "y")
    assert parse_items(dump_items(original)) == original


def test_jsonl_errors_name_the_line_and_the_field() -> None:
    text = "\n".join(
        [
            '{"item_id": "a", "input": "hi"}',
            '{"item_id": "", "input": "hi"}',
            '{"item_id": "c", "input": "hi", "expected_tool_calls": [{"args": {}}]}',
            '{"item_id": "a", "input": "again"}',
            '{"item_id": "d", "input": "hi", "colour": "red"}',
            "not json",
        ]
    )
    with pytest.raises(DatasetError) as error:
        parse_items(text, source="g.jsonl")
    problems = error.value.problems
    assert problems[0].startswith("g.jsonl:2: item_id: ")
    assert problems[1].startswith("g.jsonl:3: expected_tool_calls: ") and "`name`" in problems[1]
    assert problems[2] == "g.jsonl:4: item_id: duplicate 'a' (first on line 1)"
    assert problems[3].startswith("g.jsonl:5: colour: ")
    assert problems[4].startswith("g.jsonl:6: ")
    assert len(problems) == 5


def test_refs_parse_and_bad_refs_are_named() -> None:
    assert parse_ref("golden/a@3") == ("golden/a", 3)
    assert parse_ref("golden/a") == ("golden/a", None)
    with pytest.raises(DatasetError, match="version after '@' must be a number"):
        parse_ref("golden/a@x")


def test_item_from_trace_keeps_input_answer_calls_and_source() -> None:
    item = item_from_trace(stored_trace())
    assert item.source_trace_id == "ab" * 16
    assert item.input == {"user": "where is A1?", "conversation_id": "conv-1", "start_ns": 1_000}
    assert item.reference_answer == "shipped"
    assert item.expected_tool_calls == [{"name": "lookup_order", "args": {"order_id": "A1"}}]
    assert item.slices == {"service": "support-agent", "tool": "lookup_order"}


def store_trace(store: ClientStore, trace: Trace) -> Trace:
    store.insert("spans", span_rows(trace.spans), list(SPAN_COLUMNS))
    return trace


def raise_alert(store: ClientStore, trace: Trace, code: str, span_id: str, kind: str) -> None:
    """An alert of the realtime plane on `trace`, as the alert store sink writes it."""
    alert = Alert(alert_key=f"{code}-{trace.trace_id}-{kind}", code=code, name="x",
                  severity="high", kind=kind, reason="r", trace_id=trace.trace_id,
                  span_id=span_id, tenant="default", service="support-agent", agent="",
                  conversation_id="", risk_tier="medium", policy="default", trace_start_ns=1,
                  trace_end_ns=2, detected_at_ns=3)  # fmt: skip
    store.insert("alerts", [alert.row()], list(ALERT_COLUMNS))


def test_golden_items_from_traces_expect_what_the_trace_did(store: ClientStore) -> None:
    trace = store_trace(store, stored_trace(uuid.uuid4().hex))
    found, skipped = items_from_traces(store, f"TraceId = '{trace.trace_id}'")
    assert [i.source_trace_id for i in found] == [trace.trace_id] and skipped == []
    assert found[0].expected_tool_calls == [{"name": "lookup_order", "args": {"order_id": "A1"}}]


def test_triage_keeps_the_trace_the_input_and_the_lesson_not_the_failing_path(
    store: ClientStore,
) -> None:
    trace = store_trace(store, stored_trace(uuid.uuid4().hex))
    raise_alert(store, trace, "PG117", "03" * 8, "violation")  # on the lookup_order call
    raise_alert(store, trace, "PG111", trace.spans[0].span_id, "violation")
    raise_alert(store, trace, "PG112", trace.spans[0].span_id, "cannot_decide")  # no lesson
    info = triage(store, trace.trace_id, "regression/billing", "oncall")
    assert (info.kind, info.status, info.items) == ("regression", "draft", 1)
    (item,) = Datasets(store).items("regression/billing")
    assert item.source_trace_id == trace.trace_id
    assert item.input == {"user": "where is A1?", "conversation_id": "conv-1", "start_ns": 1_000}
    assert item.expected_tool_calls == [] and item.reference_answer is None
    assert checks_of(item) == [
        {"check": "detectors_quiet", "codes": ["PG111", "PG117"]},
        {"check": "tool_not_called", "tool": "lookup_order"},
    ]
    with pytest.raises(DatasetError, match="not in the store"):
        triage(store, uuid.uuid4().hex, "regression/billing", "oncall")


def test_triage_takes_expected_calls_and_forbidden_tools_when_given(store: ClientStore) -> None:
    trace = store_trace(store, stored_trace(uuid.uuid4().hex))
    with pytest.raises(DatasetError, match="no violation alert fired on it"):
        triage(store, trace.trace_id, "regression/given", "oncall")
    expected = [{"name": "search_kb", "args": {}}]
    triage(store, trace.trace_id, "regression/given", "o", expected, ["reset_equipment"])
    (item,) = Datasets(store).items("regression/given")
    assert item.expected_tool_calls == expected
    assert checks_of(item) == [{"check": "tool_not_called", "tool": "reset_equipment"}]


def test_a_regression_item_needs_the_users_input(store: ClientStore) -> None:
    trace = stored_trace(uuid.uuid4().hex)
    trace.spans[1].genai.input_messages = ""  # the collector did not capture messages
    store_trace(store, trace)
    raise_alert(store, trace, "PG101", "03" * 8, "violation")
    with pytest.raises(DatasetError, match="user's message was not captured"):
        triage(store, trace.trace_id, "regression/input", "oncall")
    triage(store, trace.trace_id, "regression/input", "oncall", user="where is A1?")
    assert Datasets(store).items("regression/input")[0].user_message == "where is A1?"


def test_regression_items_from_traces_skip_traces_without_a_lesson(store: ClientStore) -> None:
    failing = store_trace(store, stored_trace(uuid.uuid4().hex))
    healthy = store_trace(store, stored_trace(uuid.uuid4().hex))
    raise_alert(store, failing, "PG101", "03" * 8, "violation")
    where = f"TraceId IN ('{failing.trace_id}', '{healthy.trace_id}')"
    found, skipped = items_from_traces(store, where, kind="regression")
    assert [i.source_trace_id for i in found] == [failing.trace_id]
    assert checks_of(found[0])[0] == {"check": "detectors_quiet", "codes": ["PG101"]}
    assert len(skipped) == 1 and healthy.trace_id in skipped[0]


def test_a_regression_check_written_before_the_catalogue_reads_as_checks(
    store: ClientStore,
) -> None:
    legacy = {"must_not_fire": ["PG117"], "forbidden_calls": [{"name": "reset", "args": {"d": 1}}]}
    expected = [
        {"check": "detectors_quiet", "codes": ["PG117"]},
        {"check": "tool_not_called", "tool": "reset", "args": {"d": 1}},
    ]
    (item,) = parse_items(json.dumps({"item_id": "r", "input": "hi", "check": legacy}))
    assert checks_of(item) == expected
    store.insert(  # a row stored by migration 0007's column, before `Checks` existed
        "dataset_items",
        [["regression/old", 1, "r", '"hi"', None, "[]", "[]", {}, "", [], 1, json.dumps(legacy)]],
        ["Dataset", "Version", "ItemId", "Input", "ReferenceAnswer", "ExpectedToolCalls",
         "AlternativeTrajectories", "Slices", "SourceTraceId", "Tags", "AddedAt",
         "RegressionCheck"],
    )  # fmt: skip
    Datasets(store).create("regression/old", "regression", "o")  # version 1's dataset row
    assert checks_of(Datasets(store).items("regression/old@1")[0]) == expected
    text = '{"item_id": "r", "input": "hi", "check": {"forbidden_calls": [{"args": {}}]}}'
    with pytest.raises(
        DatasetError, match=r"<items>:1: checks\[0\]: check 'tool_not_called': tool"
    ):
        parse_items(text)


def test_a_call_takes_name_and_args_only_and_a_misspelt_key_is_named(store: ClientStore) -> None:
    lines = [
        '{"item_id": "a", "input": "q", "expected_tool_calls": [{"name": "t", "arguments": {}}]}',
        '{"item_id": "b", "input": "q", "alternative_trajectories": [[{"name": "t"}], '
        '[{"nmae": "t"}]]}',
        '{"item_id": "c", "input": "q", "expected_tool_calls": [{"name": "t", "args": "A1"}]}',
    ]
    with pytest.raises(DatasetError) as raised:
        parse_items("\n".join(lines), "calls.jsonl")
    assert raised.value.problems == [
        "calls.jsonl:1: expected_tool_calls: call 0: arguments: unknown key (did you mean 'args'?)",
        "calls.jsonl:2: alternative_trajectories: path 1, call 0: nmae: unknown key "
        "(did you mean 'name'?)",
        "calls.jsonl:3: expected_tool_calls: call 0: args: expected an object of argument values",
    ]
    stored = [{"name": "t", "arguments": {"x": 1}}]  # accepted before calls were checked
    store.insert(
        "dataset_items",
        [["golden/old-calls", 1, "a", '"q"', None, json.dumps(stored), "[]", {}, "", [], 1]],
        ["Dataset", "Version", "ItemId", "Input", "ReferenceAnswer", "ExpectedToolCalls",
         "AlternativeTrajectories", "Slices", "SourceTraceId", "Tags", "AddedAt"],
    )  # fmt: skip
    Datasets(store).create("golden/old-calls", "golden", "o")
    (item,) = Datasets(store).items("golden/old-calls@1")  # still read, as it was stored
    assert item.expected_tool_calls == stored


def test_checks_and_end_state_round_trip_through_the_store(store: ClientStore) -> None:
    declared = [
        {"check": "answer_regex", "pattern": r"\bORD-\d{6}\b"},
        {"check": "answer_json", "schema": {"type": "object"}, "required_keys": ["id"]},
        {"check": "budget", "max_cost_usd": 0.01},
    ]
    item = DatasetItem(item_id="c", input="q", checks=declared, end_state={"account.plan": "x"})
    assert json.loads(dump_items([item]))["checks"] == declared  # as written, nothing added
    datasets = Datasets(store)
    datasets.create("golden/checks", "golden", "qa")
    datasets.add("golden/checks", [item])
    assert datasets.items("golden/checks") == [item]


def test_reference_contexts_round_trip_through_the_store(store: ClientStore) -> None:
    texts = DatasetItem(item_id="t", input="q", reference_contexts=["Refunds take 5 days."])
    ids = DatasetItem(item_id="i", input="q", reference_context_ids=["kb-7", "kb-9"])
    datasets = Datasets(store)
    datasets.create("golden/contexts", "golden", "qa")
    datasets.add("golden/contexts", [texts, ids])
    assert datasets.items("golden/contexts") == [ids, texts]


def test_a_malformed_check_is_named_with_its_file_line_and_check() -> None:
    lines = [
        '{"item_id": "a", "input": "q", "checks": [{"check": "tool_called", "tool": "x"}]}',
        '{"item_id": "b", "input": "q", "checks": [{"check": "tool_called", "tool": "x"}, '
        '{"check": "answer_regex", "pattern": "(", "present": "maybe"}]}',
        '{"item_id": "c", "input": "q", "checks": [{"check": "answer_regexp", "pattern": "x"}]}',
        '{"item_id": "d", "input": "q", "checks": [{"check": "budget", "max_tokns": 5}]}',
        '{"item_id": "e", "input": "q", "end_state": {"account..plan": 1}}',
    ]
    with pytest.raises(DatasetError) as raised:
        parse_items("\n".join(lines), "golden.jsonl")
    problems = raised.value.problems
    assert problems[0].startswith("golden.jsonl:2: checks[1]: check 'answer_regex': pattern: ")
    assert "invalid regular expression '('" in problems[0]
    assert "present: Input should be a valid boolean" in problems[0]
    assert problems[1] == (  # the nearest known name
        "golden.jsonl:3: checks[0]: unknown check 'answer_regexp' (did you mean 'answer_regex'?)"
    )
    assert problems[2] == (
        "golden.jsonl:4: checks[0]: check 'budget': max_tokns: unknown key "
        "(did you mean 'max_tokens'?)"
    )
    assert problems[3] == (
        "golden.jsonl:5: end_state: 'account..plan' is not a dotted path such as account.plan"
    )
    assert len(problems) == 4


def test_filters_with_a_semicolon_are_refused_before_the_store(store: ClientStore) -> None:
    with pytest.raises(ValueError, match="`;` is not allowed"):
        items_from_traces(store, "1; DROP TABLE spans")


def test_export_writes_what_import_reads(tmp_path: Path, store: ClientStore) -> None:
    datasets = Datasets(store)
    datasets.create("bench/slice", "benchmark", "team-b")
    datasets.add("bench/slice", items("p", "q"))
    path = tmp_path / "out.jsonl"
    path.write_text(dump_items(datasets.items("bench/slice")))
    assert parse_items(path.read_text(), str(path)) == items("p", "q")
