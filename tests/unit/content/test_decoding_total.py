"""Decoding is total: whatever values a span's attributes carry, every span of a trace
message decodes, becomes a store row and is evaluated; what cannot be read as a number
is left out of the typed fields, never the span (issue 15, poison inputs)."""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.content.conventions import eval_context, genai_fields
from pathgrade.content.numbers import integral, parse_index, parse_int
from pathgrade.content.otlp import DecodeProblems, decode_kafka_message, decode_spans_message
from pathgrade.detectors.policy import default_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas import genai
from pathgrade.schemas.model import Trace
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, TENANT_HEADER

MAX_UINT32 = 2**32 - 1
MAX_UINT64 = 2**64 - 1
TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")

# Texts that look numeric to str.isdigit() or float() but not to int(), and edge cases.
TRICKY_TEXTS = [
    "²", "¹²", "①", "١٢", "٣", "12²", "-²", "1_000", " 12 ", "+7", "-0", "0x10", "1e3", "1e400",
    "nan", "inf", "-inf", "1" * 5000, "9" * 30, "", " ", "\u00a0", "12.5", "12.0", "٫5",
]  # fmt: skip
GENAI_KEYS = sorted(
    value for name, value in vars(genai).items()
    if name.isupper() and isinstance(value, str) and "." in value
)  # fmt: skip
FLATTENED_KEYS = [
    "gen_ai.prompt.{i}.content", "gen_ai.prompt.{i}.role", "gen_ai.completion.{i}.content",
    "gen_ai.completion.{i}.finish_reason", "gen_ai.prompt.{i}.tool_calls.{j}.name",
    "llm.input_messages.{i}.message.content", "llm.input_messages.{i}.message.role",
    "llm.output_messages.{i}.message.tool_calls.{j}.tool_call.function.arguments",
    "llm.input_messages.{i}.message.contents.{j}.message_content.text",
]  # fmt: skip
INDEXES = st.sampled_from(["0", "1", "²", "١", "-1", "01", "1" * 5000, "x", ""])

texts = st.one_of(st.sampled_from(TRICKY_TEXTS), st.text(max_size=40))
scalars = st.one_of(
    texts.map(lambda t: AnyValue(string_value=t)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.binary(max_size=16).map(lambda b: AnyValue(bytes_value=b)),
    st.just(AnyValue()),  # a value with nothing set
)


def _array(values: list[AnyValue]) -> AnyValue:
    value = AnyValue()
    value.array_value.values.extend(values)
    return value


def _kvlist(pairs: list[tuple[str, AnyValue]]) -> AnyValue:
    value = AnyValue()
    value.kvlist_value.values.extend(KeyValue(key=k, value=v) for k, v in pairs)
    return value


values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(_array),
        st.lists(st.tuples(texts, inner), max_size=4).map(_kvlist),
    ),
    max_leaves=12,
)
flattened_keys = st.builds(
    lambda template, i, j: template.format(i=i, j=j),
    st.sampled_from(FLATTENED_KEYS), INDEXES, INDEXES,
)  # fmt: skip
keys = st.one_of(st.sampled_from(GENAI_KEYS), flattened_keys, texts)
attribute_lists = st.lists(st.tuples(keys, values), max_size=12)
span_names = st.one_of(
    st.sampled_from(["chat gpt-4o", "execute_tool search", "invoke_agent Support", "chat"]),
    texts,
)


def _key_values(pairs: list[tuple[str, AnyValue]]) -> list[KeyValue]:
    return [KeyValue(key=k, value=v) for k, v in pairs]


def _message(
    resource: list[tuple[str, AnyValue]], spans: list[tuple[str, list, list, list]]
) -> bytes:
    """A TracesData message of one trace: a root span and children, each with attributes,
    one event and one link carrying generated values."""
    data = TracesData()
    resource_spans = data.resource_spans.add()
    resource_spans.resource.attributes.extend(_key_values(resource))
    scope_spans = resource_spans.scope_spans.add()
    for index, (name, attributes, event_attributes, link_attributes) in enumerate(spans):
        span = scope_spans.spans.add(
            trace_id=TRACE_ID,
            span_id=(index + 1).to_bytes(8, "big"),
            parent_span_id=b"" if index == 0 else (1).to_bytes(8, "big"),
            name=name,
            start_time_unix_nano=1_000 + index,
            end_time_unix_nano=2_000 + index,
        )
        span.attributes.extend(_key_values(attributes))
        span.events.add(time_unix_nano=1_500, name="e").attributes.extend(
            _key_values(event_attributes)
        )
        span.links.add(trace_id=TRACE_ID, span_id=b"\x09" * 8).attributes.extend(
            _key_values(link_attributes)
        )
        span.status.code = index % 3
    return data.SerializeToString()


span_specs = st.lists(
    st.tuples(span_names, attribute_lists, attribute_lists, attribute_lists),
    min_size=1,
    max_size=4,
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(resource=attribute_lists, spans=span_specs)
def test_every_span_decodes_becomes_a_row_and_is_evaluated(
    resource: list[tuple[str, AnyValue]], spans: list[tuple[str, list, list, list]]
) -> None:
    problems = DecodeProblems()
    decoded = decode_spans_message(_message(resource, spans), "t", 1, problems)

    assert len(decoded) == len(spans)
    assert problems == DecodeProblems()  # the views themselves never raised
    rows = span_rows(decoded)
    assert len(rows) == len(spans)
    for row in rows:
        for column in ("GenAIInputTokens", "GenAIOutputTokens", "GenAITotalTokens"):
            tokens = row[SPAN_COLUMNS.index(column)]
            assert tokens is None or 0 <= tokens <= MAX_UINT64
        replay = row[SPAN_COLUMNS.index("EvalReplayIndex")]
        assert replay is None or 0 <= replay <= MAX_UINT32
    evaluator = TurnEvaluator(default_policy(), "default", 100, 10, 100)
    trace = Trace("t", TRACE_ID.hex(), decoded)
    evaluator.evaluate(DueTurn(trace, "quiet", False), time.time_ns())


def test_superscript_digits_are_text_not_numbers() -> None:
    """The reported values: each passes str.isdigit() and made int() raise, which dropped
    every span of the trace message."""
    attributes: dict[str, Any] = {
        genai.OPERATION_NAME: "chat",
        genai.USAGE_INPUT_TOKENS: "²",
        genai.USAGE_OUTPUT_TOKENS: "7",
        genai.PG_REPLAY_INDEX: "²",
        "gen_ai.prompt.².content": "hidden",
        "gen_ai.prompt.0.content": "hello",
        "gen_ai.prompt.0.tool_calls.².name": "search",
        "llm.input_messages.١.message.role": "user",  # no index: must not hide the others
    }
    fields = genai_fields("chat gpt-4o", attributes)
    assert fields.input_tokens is None and fields.output_tokens == 7
    assert fields.total_tokens is None
    assert "hidden" not in fields.input_messages and "hello" in fields.input_messages
    assert "search" not in fields.input_messages
    assert eval_context(attributes).replay_index is None


def test_number_parsers_never_raise_and_read_ascii_only() -> None:
    for text in TRICKY_TEXTS:
        parse_int(text), parse_index(text), integral(text)
    assert [parse_int(t) for t in ("12", " -3 ", "+7", "²", "١٢", "1" * 5000)] == [
        12, -3, 7, None, None, None,
    ]  # fmt: skip
    assert [parse_index(t) for t in ("0", "12", "-1", "+1", "²", " 1")] == [
        0, 12, None, None, None, None,
    ]  # fmt: skip
    assert [integral(v) for v in ("1e3", "12.0", "12.5", "nan", "inf", 3.0, float("inf"))] == [
        1000, 12, None, None, None, 3, None,
    ]  # fmt: skip
    assert integral(True) is None and integral("٣") is None


class _Message:
    """A Kafka message as kafka-python hands it to a consumer."""

    def __init__(self, value: bytes, headers: list[tuple[str, bytes]], timestamp: int) -> None:
        self.value, self.headers, self.timestamp = value, headers, timestamp


def test_unreadable_headers_fall_back_to_defaults_and_are_counted() -> None:
    value = _message([], [("chat", [], [], [])])
    problems = DecodeProblems()
    cases = [
        [(TENANT_HEADER, b"\xff\xfe"), (RECEIVED_AT_HEADER, "²".encode())],
        [(RECEIVED_AT_HEADER, str(2**70).encode())],
        [(RECEIVED_AT_HEADER, b"-5")],
    ]
    decoded = [decode_kafka_message(_Message(value, h, 1_700_000_000_000), problems) for h in cases]

    assert problems.unreadable_headers == 3
    assert decoded[0][0].tenant == "\ufffd\ufffd"
    assert {spans[0].received_at_ns for spans in decoded} == {1_700_000_000_000 * 1_000_000}
    no_timestamp = decode_kafka_message(_Message(value, [], -1), problems)
    assert no_timestamp[0].received_at_ns == 0
