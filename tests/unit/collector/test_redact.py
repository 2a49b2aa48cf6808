"""Tests for collector.redact: content removal, scrubbing and the Luhn check."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.collector.facts import CONTEXT_KEYS as CONTEXT_KEYS_OF_FACTS
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content.pii import luhn_valid
from pathgrade.content.withheld import read_withheld
from pathgrade.schemas import genai
from pathgrade.schemas.personal_data import CARD_MARK, EMAIL_MARK, PATTERN_MARK
from pydantic import ValidationError

VISA_TEST_CARD = "4111111111111111"  # a Luhn-valid test number, no real account


def _kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, str):
        return KeyValue(key=key, value=AnyValue(string_value=value))
    return KeyValue(key=key, value=AnyValue(int_value=value))


def _request(*spans: trace_pb2.Span) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(spans)
    return request


def _span(
    attributes: dict[str, Any], events: Sequence[trace_pb2.Span.Event] = ()
) -> trace_pb2.Span:
    return trace_pb2.Span(
        name="s", attributes=[_kv(k, v) for k, v in attributes.items()], events=events
    )


def _redact(span: trace_pb2.Span, **config: Any) -> dict[str, Any]:
    """Redact a one-span request; returns the span's attributes as a dict."""
    request = _request(span)
    Redactor(RedactionConfig(**config)).redact(request)
    return _attributes(request.resource_spans[0].scope_spans[0].spans[0].attributes)


def _attributes(attributes: Any) -> dict[str, Any]:
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in attributes}


GENAI_TOOL = {
    genai.OPERATION_NAME: genai.OP_EXECUTE_TOOL,
    genai.TOOL_NAME: "search",
    genai.TOOL_CALL_ARGUMENTS: '{"q": "paris"}',
    genai.TOOL_CALL_RESULT: "sunny",
}
OPENINFERENCE_TOOL = {
    genai.OI_SPAN_KIND: "TOOL",
    genai.OI_TOOL_NAME: "search",
    genai.OI_INPUT_VALUE: '{"q": "paris"}',
    genai.OI_OUTPUT_VALUE: "sunny",
    genai.OI_TOOL_PARAMETERS: "{}",
}
TRACELOOP_TOOL = {
    genai.TL_SPAN_KIND: "tool",
    genai.TL_ENTITY_NAME: "search",
    genai.TL_ENTITY_INPUT: '{"q": "paris"}',
    genai.TL_ENTITY_OUTPUT: "sunny",
}
TOOL_SPANS = [GENAI_TOOL, OPENINFERENCE_TOOL, TRACELOOP_TOOL]
CONTEXT_KEYS = {
    genai.OPERATION_NAME,
    genai.TOOL_NAME,
    genai.OI_SPAN_KIND,
    genai.OI_TOOL_NAME,
    genai.TL_SPAN_KIND,
    genai.TL_ENTITY_NAME,
}


@pytest.mark.parametrize("attributes", TOOL_SPANS)
def test_tool_content_removed_by_default(attributes: dict[str, str]) -> None:
    kept = _redact(_span(attributes))
    content = set(attributes) - CONTEXT_KEYS
    assert set(kept) == (set(attributes) - content) | {genai.PG_REDACTED_KEYS}
    assert kept[genai.PG_REDACTED_KEYS] == len(content)


@pytest.mark.parametrize("attributes", TOOL_SPANS)
@pytest.mark.parametrize("capture_tools", [["search"], ["*"], ["other", "search"]])
def test_captured_tool_keeps_content(attributes: dict[str, str], capture_tools: list[str]) -> None:
    assert _redact(_span(attributes), capture_tools=capture_tools) == attributes


@pytest.mark.parametrize("attributes", TOOL_SPANS)
def test_other_tool_captured_does_not_keep_content(attributes: dict[str, str]) -> None:
    kept = _redact(_span(attributes), capture_tools=["calculator"], capture_messages=True)
    assert genai.PG_REDACTED_KEYS in kept
    assert not set(kept) & {genai.TOOL_CALL_RESULT, genai.OI_OUTPUT_VALUE, genai.TL_ENTITY_OUTPUT}


def test_traceloop_entity_name_is_not_a_tool_name_on_non_tool_spans() -> None:
    span = _span(
        {genai.TL_SPAN_KIND: "task", genai.TL_ENTITY_NAME: "search", genai.TL_ENTITY_INPUT: "hi"}
    )
    kept = _redact(span, capture_tools=["search"])
    assert genai.TL_ENTITY_INPUT not in kept


MESSAGE_SPAN = {
    genai.OPERATION_NAME: genai.OP_CHAT,
    genai.REQUEST_MODEL: "gpt-4o",
    genai.INPUT_MESSAGES: "[]",
    genai.OUTPUT_MESSAGES: "[]",
    genai.SYSTEM_INSTRUCTIONS: "be nice",
    "gen_ai.prompt.0.content": "hello",
    "gen_ai.completion.0.content": "hi",
    "llm.input_messages.0.message.content": "hello",
    "llm.output_messages.0.message.content": "hi",
    genai.OI_INPUT_VALUE: "hello",
    genai.TL_ENTITY_OUTPUT: "hi",
    # OpenLLMetry's LangGraph task spans repeat a step's input and output here (0.62)
    genai.TASK_INPUT: '{"inputs": {"message": "book a test drive"}}',
    genai.TASK_OUTPUT: '{"outputs": {"route": "test_drive"}}',
}


def test_message_content_removed_by_default_even_with_all_tools() -> None:
    kept = _redact(_span(MESSAGE_SPAN), capture_tools=["*"])
    assert kept == {
        genai.OPERATION_NAME: genai.OP_CHAT,
        genai.REQUEST_MODEL: "gpt-4o",
        genai.PG_REDACTED_KEYS: len(MESSAGE_SPAN) - 2,
    }


def test_message_content_kept_when_captured() -> None:
    assert _redact(_span(MESSAGE_SPAN), capture_messages=True) == MESSAGE_SPAN


def test_content_event_attributes_dropped_but_event_kept() -> None:
    event = trace_pb2.Span.Event(
        name=genai.EVENT_USER_MESSAGE, attributes=[_kv("content", "hello"), _kv("role", "user")]
    )
    exception = trace_pb2.Span.Event(name="exception", attributes=[_kv("exception.type", "E")])
    request = _request(_span({genai.USAGE_INPUT_TOKENS: 1}, events=[event, exception]))
    stats = Redactor(RedactionConfig()).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert [e.name for e in span.events] == [genai.EVENT_USER_MESSAGE, "exception"]
    assert len(span.events[0].attributes) == 0
    assert _attributes(span.events[1].attributes) == {"exception.type": "E"}
    assert _attributes(span.attributes) == {genai.USAGE_INPUT_TOKENS: 1, genai.PG_REDACTED_KEYS: 2}
    assert stats.removed_attributes == 2


def test_content_event_kept_when_messages_captured() -> None:
    attributes = [_kv("content", "hi jo@example.com"), _kv("index", 0)]
    event = trace_pb2.Span.Event(name=genai.EVENT_CHOICE, attributes=attributes)
    request = _request(_span({}, events=[event]))
    Redactor(RedactionConfig(capture_messages=True)).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert _attributes(span.events[0].attributes) == {"content": f"hi {EMAIL_MARK}", "index": 0}
    assert len(span.attributes) == 0


def test_a_tool_call_decision_travels_on_default_settings() -> None:
    """PG111 reads the decision's outcome, call id and tool name: none is withheld."""
    decision = {
        genai.TOOL_CALL_DECISION_OUTCOME: "require_approval",
        genai.TOOL_CALL_ID: "call_1",
        genai.TOOL_NAME: "reset_equipment",
    }
    attributes = [_kv(k, v) for k, v in decision.items()]
    event = trace_pb2.Span.Event(name=genai.EVENT_TOOL_CALL_DECISION, attributes=attributes)
    request = _request(_span({}, events=[event]))
    Redactor(RedactionConfig()).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert _attributes(span.events[0].attributes) == decision


def test_span_without_content_gets_no_marker() -> None:
    assert _redact(_span({genai.OPERATION_NAME: "chat", genai.USAGE_OUTPUT_TOKENS: 3})) == {
        genai.OPERATION_NAME: "chat",
        genai.USAGE_OUTPUT_TOKENS: 3,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail bob.smith+x@example.co.uk now", f"mail {EMAIL_MARK} now"),
        (f"card {VISA_TEST_CARD}.", f"card {CARD_MARK}."),
        ("card 4111 1111 1111 1111 ok", f"card {CARD_MARK} ok"),
        ("card 4111-1111-1111-1111", f"card {CARD_MARK}"),
        ("amex 378282246310005", f"amex {CARD_MARK}"),
        ("card 4111 1111 1111 1111 12/25", f"card {CARD_MARK} 12/25"),
        ("not luhn 4111111111111112", "not luhn 4111111111111112"),
        ("too short 411111111111", "too short 411111111111"),
        ("too long 41111111111111111111", "too long 41111111111111111111"),
        ("no at sign: example.com", "no at sign: example.com"),
    ],
)
def test_scrub_text(text: str, expected: str) -> None:
    assert Redactor(RedactionConfig()).scrub_text(text) == expected


def _everywhere(email: str) -> ExportTraceServiceRequest:
    """`email` in a span's, an event's, a link's and the resource's attributes, nested in an
    array and a key-value list too."""
    nested = AnyValue(
        array_value=ArrayValue(
            values=[
                AnyValue(string_value=email),
                AnyValue(kvlist_value=KeyValueList(values=[_kv("inner", email)])),
            ]
        )
    )
    span = _span({"top": email, "n": 5})
    span.attributes.add(key="nested").value.CopyFrom(nested)
    span.events.add(name="log").attributes.append(_kv("msg", email))
    span.links.add(trace_id=b"\xa1" * 16, span_id=b"\xb2" * 8).attributes.append(_kv("who", email))
    request = _request(span)
    request.resource_spans[0].resource.attributes.append(_kv("owner", email))
    return request


def test_allowed_values_are_scrubbed_in_events_links_nested_and_resource() -> None:
    request = _everywhere("a@b.io")
    config = RedactionConfig(allowed_keys=["top", "n", "nested", "msg", "who", "own*"])
    stats = Redactor(config).redact(request)
    assert stats.scrubbed_values == 6 and stats.withheld_values == 0
    assert "a@b.io" not in str(request)
    assert str(request).count(EMAIL_MARK) == 6
    assert stats.removed_attributes == 0


def test_values_not_allowed_travel_as_their_marks_in_every_attribute_list() -> None:
    """Any value whose key is not allowed is withheld (its type, keyed fingerprint and the
    kinds found): the same value twice gets the same mark, another value another."""
    request = _everywhere("a@b.io")
    request.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="again").value.CopyFrom(
        AnyValue(string_value="a@b.io")
    )
    stats = Redactor(RedactionConfig()).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    values = _attributes(span.attributes)
    marks = {k: read_withheld(v) for k, v in values.items()}
    assert marks["top"] == marks["again"] and marks["top"].kinds == ("email",)
    assert (marks["n"].type, marks["n"].kinds) == ("int", ())
    assert (marks["nested"].type, marks["nested"].kinds) == ("array", ("email",))
    assert marks["nested"].fingerprint != marks["top"].fingerprint
    event, link = span.events[0], span.links[0]
    assert read_withheld(_attributes(event.attributes)["msg"]).kinds == ("email",)
    assert read_withheld(_attributes(link.attributes)["who"]).kinds == ("email",)
    owner = _attributes(request.resource_spans[0].resource.attributes)["owner"]
    assert read_withheld(owner).kinds == ("email",)
    assert "a@b.io" not in str(request) and EMAIL_MARK not in str(request)
    assert stats.withheld_values == 7 and stats.scrubbed_values == 7


def test_keys_that_are_not_keys_are_withheld_with_their_values() -> None:
    email_key, spaced = "note for ana@example.com", "ünïcode key"
    kept = _redact(_span({email_key: "x", spaced: "y", genai.TOOL_NAME: "search"}))
    assert kept[genai.TOOL_NAME] == "search"
    withheld = {read_withheld(k): read_withheld(v) for k, v in kept.items() if k.startswith("[")}
    assert {(k.type, k.kinds) for k in withheld} == {("key", ("email",)), ("key", ())}
    assert all(v is not None and v.type == "string" for v in withheld.values())


def test_openinference_metadata_travels_as_its_structural_members_only() -> None:
    """LangGraph names its node in `metadata` beside free text: the node, step and triggers
    travel (scrubbed), everything else is dropped; metadata that is no JSON object is
    withheld like any value."""
    metadata = {
        "langgraph_node": "tools", "langgraph_step": 3, "langgraph_triggers": ["branch:tools"],
        "ls_integration": "langgraph", "thread_id": "t-1", "note": "ana@example.com",
        "langgraph_path": ["__pregel_pull", f"card {VISA_TEST_CARD}"], "nested": {"a": "b"},
    }  # fmt: skip
    forwarded = json.loads(_redact(_span({genai.OI_METADATA: json.dumps(metadata)}))["metadata"])
    assert forwarded == {
        "langgraph_node": "tools", "langgraph_step": 3, "langgraph_triggers": ["branch:tools"],
        "ls_integration": "langgraph", "langgraph_path": ["__pregel_pull", f"card {CARD_MARK}"],
    }  # fmt: skip
    for text in ("not json ana@example.com", "[1, 2]"):
        mark = read_withheld(_redact(_span({genai.OI_METADATA: text}))["metadata"])
        assert mark is not None and mark.type == "string"


def test_booleans_and_empty_strings_travel_as_they_are() -> None:
    span = _span({"empty": ""})
    span.attributes.add(key="flag").value.bool_value = True
    assert _redact(span) == {"flag": True, "empty": ""}


def test_the_status_message_is_withheld_unless_allowed() -> None:
    for config, expected in (({}, None), ({"allowed_keys": ["status.message"]}, "failed")):
        span = _span({})
        span.status.message = "failed"
        request = _request(span)
        Redactor(RedactionConfig(**config)).redact(request)
        message = request.resource_spans[0].scope_spans[0].spans[0].status.message
        assert (read_withheld(message) is None) == (expected is not None), message
        assert expected is None or message == expected


def test_identifiers_that_need_scrubbing_become_fingerprints_so_users_stay_apart() -> None:
    """Two conversations whose ids both hold a card number stay two (a constant mark would
    merge them), in every convention's key; an id with nothing to scrub is kept."""
    ids = ["conv-4111 1111 1111 1111", "conv-5555 5555 5555 4444", "conv-plain-7"]
    redactor = Redactor(RedactionConfig())
    for key in (genai.CONVERSATION_ID, genai.OI_SESSION_ID, genai.TL_SESSION_ID):
        forwarded = [_redact_with(redactor, _span({key: c}))[key] for c in [*ids, ids[0]]]
        assert len(set(forwarded)) == 3 and forwarded[2] == "conv-plain-7"
        assert forwarded[3] == forwarded[0]  # the same id, the same fingerprint
        cards = [c.removeprefix("conv-") for c in ids[:2]]  # spaced: no fingerprint holds one
        assert not any(card in f or "REDACTED" in f for f in forwarded for card in cards)


def _redact_with(redactor: Redactor, span: trace_pb2.Span) -> dict[str, Any]:
    request = _request(span)
    redactor.redact(request)
    return _attributes(request.resource_spans[0].scope_spans[0].spans[0].attributes)


def test_trace_and_span_ids_holding_a_card_are_mapped_alike_everywhere() -> None:
    card_span, card_trace = (
        bytes.fromhex("4111111111111111"),
        bytes.fromhex("0" * 16 + "5555555555554444"),
    )
    parent = trace_pb2.Span(name="p", trace_id=card_trace, span_id=card_span)
    child = trace_pb2.Span(
        name="c", trace_id=card_trace, span_id=b"\x01" * 8, parent_span_id=card_span
    )
    child.links.add(trace_id=card_trace, span_id=card_span)
    request = _request(parent, child)
    Redactor(RedactionConfig()).redact(request)
    parent, child = request.resource_spans[0].scope_spans[0].spans
    assert parent.span_id == child.parent_span_id == child.links[0].span_id != card_span
    assert parent.trace_id == child.trace_id == child.links[0].trace_id != card_trace
    assert (len(parent.span_id), len(parent.trace_id), child.span_id) == (8, 16, b"\x01" * 8)


def test_extra_patterns() -> None:
    redactor = Redactor(RedactionConfig(extra_patterns=[r"sk-[A-Za-z0-9]{8,}"]))
    assert redactor.scrub_text("key sk-abcdef123456 end") == f"key {PATTERN_MARK} end"


def test_invalid_extra_pattern_is_named() -> None:
    with pytest.raises(ValidationError, match=r"extra_patterns\[1\] '\(unclosed' is not a valid"):
        RedactionConfig(extra_patterns=["ok", "(unclosed"])


def test_an_empty_allowed_key_is_named() -> None:
    with pytest.raises(ValidationError, match=r"allowed_keys\[1\] is empty"):
        RedactionConfig(allowed_keys=["app.public", " "])


def test_allowed_keys_add_exact_keys_and_patterns_to_the_defaults() -> None:
    config = {"allowed_keys": ["app.plan", "app.public.*", "team.[ab]"]}
    span = _span({"app.plan": "gold", "app.public.region": "eu", "team.a": "x", "team.c": "y"})
    kept = _redact(span, **config)
    assert (kept["app.plan"], kept["app.public.region"], kept["team.a"]) == ("gold", "eu", "x")
    assert read_withheld(kept["team.c"]) is not None


def test_every_key_the_capture_policy_reads_is_allowed_by_default() -> None:
    """The context keys are forwarded as allowed values: the default list holds them."""
    redactor = Redactor(RedactionConfig())
    assert all(redactor.allowed.allows(key) for key in CONTEXT_KEYS_OF_FACTS)


def test_config_rejects_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="capture_message"):
        RedactionConfig(capture_message=True)


def test_stats_count_spans() -> None:
    request = _request(_span(GENAI_TOOL), _span({"x": "y"}))
    stats = Redactor(RedactionConfig()).redact(request)
    assert (stats.spans, stats.removed_attributes) == (2, 2)


# Luhn vectors from arthurdejong/python-stdnum tests/test_luhn.doctest.
@pytest.mark.parametrize(
    ("digits", "valid"),
    [
        ("4992739871", False),  # test_luhn.doctest: checksum 9, validate raises
        ("490154203237518", True),  # test_luhn.doctest: checksum 0
        ("49927398716", True),  # test_luhn.doctest: calc_check_digit('4992739871') == '6'
        ("1428572", True),  # test_luhn.doctest: calc_check_digit('142857') == '2'
        ("3984382462386423786482364872364827347", True),  # test_luhn.doctest
    ],
)
def test_luhn_reference_vectors(digits: str, valid: bool) -> None:
    assert luhn_valid(digits) is valid


@pytest.mark.parametrize("digits", ["", "7", "4111 1111", "41x1", "４１"])
def test_luhn_rejects_non_digit_or_short_input(digits: str) -> None:
    assert luhn_valid(digits) is False


def test_luhn_detects_every_single_digit_change() -> None:
    for position in range(len(VISA_TEST_CARD)):
        original = int(VISA_TEST_CARD[position])
        for replacement in set(range(10)) - {original}:
            changed = f"{VISA_TEST_CARD[:position]}{replacement}{VISA_TEST_CARD[position + 1 :]}"
            assert not luhn_valid(changed), changed


def test_hostile_text_without_personal_data_comes_back_unchanged() -> None:
    """Near-misses of both patterns (a long local part, a lone '@', a long run of spaced
    digits that fail Luhn); its cost per character is bench/scrub.py's."""
    hostile = "a" * 200_000 + "@" + "1 " * 100_000
    assert Redactor(RedactionConfig()).scrub_text(hostile) == hostile


def test_repeated_texts_are_scrubbed_every_time_and_past_the_cache_bound() -> None:
    """The scrub cache never lets a repeat through, also after it was cleared when full."""
    redactor = Redactor(RedactionConfig(allowed_keys=["note"]))
    texts = [f"note {n}: reach ana.{n}@example.com" for n in range(20_000)]  # > cache bound
    spans = [_span({"note": text}) for text in texts + texts[:5]]
    request = _request(*spans)
    redactor.redact(request)
    kept = [
        _attributes(s.attributes)["note"] for s in request.resource_spans[0].scope_spans[0].spans
    ]
    assert all("@" not in value and "[REDACTED:email]" in value for value in kept)
    assert kept[-5:] == kept[:5]
