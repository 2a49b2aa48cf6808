"""Tests for collector.redact: content removal, scrubbing and the Luhn check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.schemas import genai
from pathgrade.schemas.pii import CARD_MARK, EMAIL_MARK, PATTERN_MARK, luhn_valid
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
    request = _request(_span({"a": 1}, events=[event, exception]))
    stats = Redactor(RedactionConfig()).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert [e.name for e in span.events] == [genai.EVENT_USER_MESSAGE, "exception"]
    assert len(span.events[0].attributes) == 0
    assert _attributes(span.events[1].attributes) == {"exception.type": "E"}
    assert _attributes(span.attributes) == {"a": 1, genai.PG_REDACTED_KEYS: 2}
    assert stats.removed_attributes == 2


def test_content_event_kept_when_messages_captured() -> None:
    event = trace_pb2.Span.Event(name=genai.EVENT_CHOICE, attributes=[_kv("content", "hi")])
    request = _request(_span({}, events=[event]))
    Redactor(RedactionConfig(capture_messages=True)).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert _attributes(span.events[0].attributes) == {"content": "hi"}
    assert len(span.attributes) == 0


def test_span_without_content_gets_no_marker() -> None:
    assert _redact(_span({genai.OPERATION_NAME: "chat", "n": 3})) == {
        genai.OPERATION_NAME: "chat",
        "n": 3,
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


def test_scrub_reaches_events_links_nested_and_resource() -> None:
    email = "a@b.io"
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
    span.links.add(trace_id=b"1" * 16, span_id=b"2" * 8).attributes.append(_kv("who", email))
    request = _request(span)
    request.resource_spans[0].resource.attributes.append(_kv("owner", email))
    stats = Redactor(RedactionConfig()).redact(request)
    assert stats.scrubbed_values == 6
    assert email not in str(request)
    assert str(request).count(EMAIL_MARK) == 6
    assert stats.removed_attributes == 0


def test_extra_patterns() -> None:
    redactor = Redactor(RedactionConfig(extra_patterns=[r"sk-[A-Za-z0-9]{8,}"]))
    assert redactor.scrub_text("key sk-abcdef123456 end") == f"key {PATTERN_MARK} end"


def test_invalid_extra_pattern_is_named() -> None:
    with pytest.raises(ValidationError, match=r"extra_patterns\[1\] '\(unclosed' is not a valid"):
        RedactionConfig(extra_patterns=["ok", "(unclosed"])


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
    redactor = Redactor(RedactionConfig())
    texts = [f"note {n}: reach ana.{n}@example.com" for n in range(20_000)]  # > cache bound
    spans = [_span({"note": text}) for text in texts + texts[:5]]
    request = _request(*spans)
    redactor.redact(request)
    kept = [
        _attributes(s.attributes)["note"] for s in request.resource_spans[0].scope_spans[0].spans
    ]
    assert all("@" not in value and "[REDACTED:email]" in value for value in kept)
    assert kept[-5:] == kept[:5]
