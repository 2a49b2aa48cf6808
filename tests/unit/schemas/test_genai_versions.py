"""Convention versions as data (`schemas.genai_versions`): a fixture per version, one chat
call written to it (tests/fixtures/genai_versions/), maps onto the same GenAI view; the
renames drive the mapping's chains (and the allow-list: tests/unit/collector/test_allow_list.py);
the table generated into docs is tested with its renderer
(tests/unit/pathgrade/cli/test_reference.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pathgrade.content.conventions import genai_fields
from pathgrade.content.events import join_records
from pathgrade.content.messages import assistant_text, parse_messages, request_text
from pathgrade.schemas import genai
from pathgrade.schemas.genai_versions import GENAI_VERSION, VERSIONS, older_names
from pathgrade.schemas.model import LogRecord, Span, SpanEvent

from tests.support.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "genai_versions"
TRACE, SPAN_ID = "ab" * 16, "cd" * 8
MESSAGES_NOT_READ = {"1.26.0"}
"""Versions whose messages pathgrade does not read (v1.26.0's `gen_ai.content.*` span
events: the version table says so)."""


def _fixture(version: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{version}.json").read_text())


def _span(fixture: dict[str, Any]) -> Span:
    """The fixture's chat span in canonical form, its records joined to it."""
    raw = fixture["span"]
    span = Span(
        tenant="t", trace_id=TRACE, span_id=SPAN_ID, parent_span_id="", name=raw["name"],
        kind="Client", start_ns=10**18, end_ns=10**18 + 10**9, attributes=raw["attributes"],
        events=[SpanEvent(10**18, e["name"], e["attributes"]) for e in raw["events"]],
        genai=genai_fields(raw["name"], raw["attributes"]),
    )  # fmt: skip
    records = [
        LogRecord(tenant="t", trace_id=TRACE, span_id=SPAN_ID, time_ns=10**18 + index,
                  observed_ns=10**18 + index, event_name=r["event_name"],
                  attributes=r["attributes"], body=r["body"])
        for index, r in enumerate(fixture["records"])
    ]  # fmt: skip
    if records:
        join_records(span, records)
    return span


def test_every_version_has_a_fixture_and_no_fixture_is_left_over() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(v.version for v in VERSIONS)
    assert VERSIONS[-1].version == GENAI_VERSION and VERSIONS[-1].source == genai.GENAI_CONVENTIONS


@pytest.mark.parametrize("version", [v.version for v in VERSIONS])
def test_a_chat_call_of_every_version_maps_onto_one_view(version: str) -> None:
    fixture = _fixture(version)
    assert fixture["version"] == version
    span = _span(fixture)
    fields = span.genai
    assert (fields.operation, fields.provider_name, fields.request_model) == (
        "chat", "openai", "gpt-4o",
    )  # fmt: skip
    assert (fields.input_tokens, fields.output_tokens) == (120, 30)
    if version in MESSAGES_NOT_READ:
        assert not fields.input_messages and not fields.output_messages
        return
    assert request_text(parse_messages(fields.input_messages)) == "Where is my order?"
    assert assistant_text(parse_messages(fields.output_messages)) == "It ships today."


def test_renames_chain_to_the_newest_name_and_the_mapping_reads_them() -> None:
    assert older_names(genai.PROVIDER_NAME) == ("gen_ai.system",)
    assert older_names(genai.USAGE_INPUT_TOKENS) == ("gen_ai.usage.prompt_tokens",)
    assert older_names("gen_ai.usage.cache_write.input_tokens") == (
        "gen_ai.usage.cache_creation.input_tokens",
    )
    assert older_names(genai.OPERATION_NAME) == ()
    # the newest name wins over an older one on the same span
    both = genai_fields("chat", {"gen_ai.provider.name": "anthropic", "gen_ai.system": "openai"})
    assert both.provider_name == "anthropic"


def test_a_generic_part_is_message_text_and_reasoning_is_not() -> None:
    message = {"role": "assistant", "parts": [
        {"type": "reasoning", "content": "thinking"},
        {"type": "refusal", "content": "I cannot share that."},
        {"type": "blob", "modality": "image", "content": "aGVsbG8="},
    ]}  # fmt: skip
    assert assistant_text([message]) == "I cannot share that."
