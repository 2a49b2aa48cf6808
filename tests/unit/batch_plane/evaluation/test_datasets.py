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
from pathgrade.schemas.model import GenAIFields, Span, Trace

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)


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


def test_from_traces_and_triage_read_stored_spans(store: ClientStore) -> None:
    trace = stored_trace(uuid.uuid4().hex)
    store.insert("spans", span_rows(trace.spans), list(SPAN_COLUMNS))
    found = items_from_traces(store, f"TraceId = '{trace.trace_id}'")
    assert [i.source_trace_id for i in found] == [trace.trace_id]
    info = triage(store, trace.trace_id, "regression/billing", "oncall")
    assert (info.kind, info.status, info.items) == ("regression", "draft", 1)
    assert Datasets(store).items("regression/billing")[0].source_trace_id == trace.trace_id
    with pytest.raises(DatasetError, match="not in the store"):
        triage(store, uuid.uuid4().hex, "regression/billing", "oncall")


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
