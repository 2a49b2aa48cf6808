"""Tests for content.conventions: GenAI, OpenInference and OpenLLMetry attributes -> GenAIFields."""

from __future__ import annotations

import json

import pytest
from pathgrade.content.conventions import content_fields, content_view, eval_context, genai_fields
from pathgrade.schemas import genai


def test_current_genai_chat_span() -> None:
    fields = genai_fields(
        "chat gpt-4o",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 20,
            "gen_ai.conversation.id": "conv-1",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.input.messages": '[{"role": "user", "parts": []}]',
            "error.type": "timeout",
        },
    )
    assert fields.operation == "chat"
    assert fields.provider_name == "openai"
    assert fields.request_model == "gpt-4o"
    assert fields.response_model == "gpt-4o-2024-08-06"
    assert (fields.input_tokens, fields.output_tokens, fields.total_tokens) == (100, 20, 120)
    assert fields.conversation_id == "conv-1"
    assert fields.finish_reasons == ["stop"]
    assert fields.input_messages == '[{"role": "user", "parts": []}]'
    assert fields.output_messages == ""
    assert fields.error_type == "timeout"


def test_current_genai_tool_span() -> None:
    fields = genai_fields(
        "execute_tool get_weather",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            "gen_ai.tool.call.result": '{"temp": 21}',
        },
    )
    assert fields.operation == "execute_tool"
    assert (fields.tool_name, fields.tool_call_id, fields.tool_type) == (
        "get_weather",
        "call_1",
        "function",
    )
    assert fields.tool_arguments == '{"city": "Paris"}'
    assert fields.tool_result == '{"temp": 21}'


def test_deprecated_aliases_fill_in_when_current_names_are_absent() -> None:
    fields = genai_fields(
        "chat m",
        {
            "gen_ai.system": "anthropic",
            "gen_ai.usage.prompt_tokens": 7,
            "gen_ai.usage.completion_tokens": 3,
        },
    )
    assert fields.provider_name == "anthropic"
    assert (fields.input_tokens, fields.output_tokens, fields.total_tokens) == (7, 3, 10)


def test_current_names_win_over_deprecated_aliases() -> None:
    fields = genai_fields(
        "x",
        {
            "gen_ai.provider.name": "openai",
            "gen_ai.system": "anthropic",
            "gen_ai.usage.input_tokens": 0,
            "gen_ai.usage.prompt_tokens": 9,
        },
    )
    assert fields.provider_name == "openai"
    assert fields.input_tokens == 0


def test_openinference_llm_span_with_flattened_messages() -> None:
    fields = genai_fields(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.provider": "openai",
            "llm.token_count.prompt": 12,
            "llm.token_count.completion": 5,
            "llm.token_count.total": 18,
            "session.id": "sess-9",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Be brief.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Weather in Paris?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": (
                '{"city": "Paris"}'
            ),
            "input.value": "raw input, not used when messages exist",
        },
    )
    assert fields.operation == "chat"
    assert fields.request_model == "gpt-4o-mini"
    assert fields.provider_name == "openai"
    assert (fields.input_tokens, fields.output_tokens, fields.total_tokens) == (12, 5, 18)
    assert fields.conversation_id == "sess-9"
    assert json.loads(fields.input_messages) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert json.loads(fields.output_messages) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "get_weather",
                    "arguments": {"city": "Paris"},
                }
            ],
        }
    ]


def test_openinference_llm_span_falls_back_to_input_and_output_value() -> None:
    fields = genai_fields(
        "llm",
        {"openinference.span.kind": "LLM", "input.value": "hi", "output.value": "hello"},
    )
    assert (fields.input_messages, fields.output_messages) == ("hi", "hello")
    assert (fields.tool_arguments, fields.tool_result) == ("", "")


def test_openinference_tool_span_reads_input_and_output_as_tool_payloads() -> None:
    fields = genai_fields(
        "get_weather",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool_call.id": "call_7",
            "tool.parameters": '{"type": "object"}',
            "input.value": '{"city": "Oslo"}',
            "output.value": "rain",
        },
    )
    assert fields.operation == "execute_tool"
    assert (fields.tool_name, fields.tool_call_id) == ("get_weather", "call_7")
    assert (fields.tool_arguments, fields.tool_result) == ('{"city": "Oslo"}', "rain")
    assert fields.input_messages == ""


def test_openinference_agent_span() -> None:
    fields = genai_fields("Support", {"openinference.span.kind": "AGENT", "agent.name": "Support"})
    assert (fields.operation, fields.agent_name) == ("invoke_agent", "Support")


@pytest.mark.parametrize(
    ("kind", "operation"),
    [
        ("CHAIN", "chain"),
        ("RETRIEVER", "retrieval"),
        ("EMBEDDING", "embeddings"),
        ("RERANKER", "rerank"),
        ("GUARDRAIL", "guardrail"),
        ("EVALUATOR", "evaluator"),
        ("UNKNOWN", ""),
    ],
)
def test_openinference_span_kinds(kind: str, operation: str) -> None:
    assert genai_fields("step", {"openinference.span.kind": kind}).operation == operation


@pytest.mark.parametrize("kind", ["workflow", "agent"])
def test_openllmetry_workflow_and_agent_spans_are_agent_invocations(kind: str) -> None:
    fields = genai_fields(
        f"planner.{kind}",
        {
            "traceloop.span.kind": kind,
            "traceloop.entity.name": "planner",
            "traceloop.entity.input": '{"q": 1}',
        },
    )
    assert (fields.operation, fields.agent_name) == ("invoke_agent", "planner")
    assert fields.tool_name == ""
    assert fields.tool_arguments == ""


def test_openllmetry_task_span() -> None:
    fields = genai_fields(
        "summarise.task", {"traceloop.span.kind": "task", "traceloop.entity.name": "summarise"}
    )
    assert fields.operation == "task"
    assert (fields.agent_name, fields.tool_name) == ("", "")


def test_openllmetry_tool_span() -> None:
    fields = genai_fields(
        "search.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "search",
            "traceloop.entity.input": '{"args": [], "kwargs": {"q": "x"}}',
            "traceloop.entity.output": '"found"',
        },
    )
    assert (fields.operation, fields.tool_name) == ("execute_tool", "search")
    assert fields.tool_arguments == '{"args": [], "kwargs": {"q": "x"}}'
    assert fields.tool_result == '"found"'


def test_openllmetry_llm_span_with_legacy_prompt_and_completion_keys() -> None:
    fields = genai_fields(
        "openai.chat",
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.prompt_tokens": "30",
            "gen_ai.usage.completion_tokens": "4",
            "llm.usage.total_tokens": 34,
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "What is 2+2?",
            "gen_ai.prompt.1.role": "tool",
            "gen_ai.prompt.1.tool_call_id": "call_0",
            "gen_ai.prompt.1.content": "4",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "4",
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.completion.0.tool_calls.0.id": "call_2",
            "gen_ai.completion.0.tool_calls.0.name": "calc",
            "gen_ai.completion.0.tool_calls.0.arguments": "not json",
        },
    )
    assert fields.operation == "chat"
    assert (fields.provider_name, fields.request_model) == ("openai", "gpt-4o")
    assert (fields.input_tokens, fields.output_tokens, fields.total_tokens) == (30, 4, 34)
    assert json.loads(fields.input_messages) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2+2?"}]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_0", "response": "4"}],
        },
    ]
    assert json.loads(fields.output_messages) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "4"},
                {"type": "tool_call", "id": "call_2", "name": "calc", "arguments": "not json"},
            ],
            "finish_reason": "stop",
        }
    ]
    assert fields.finish_reasons == ["stop"]


def test_flattened_messages_are_ordered_by_numeric_index() -> None:
    attributes = {"llm.request.type": "completion"}
    for index in (10, 2, 0):
        attributes[f"gen_ai.prompt.{index}.role"] = "user"
        attributes[f"gen_ai.prompt.{index}.content"] = f"m{index}"
    fields = genai_fields("x", attributes)
    assert fields.operation == "text_completion"
    contents = [m["parts"][0]["content"] for m in json.loads(fields.input_messages)]
    assert contents == ["m0", "m2", "m10"]


@pytest.mark.parametrize(
    ("span_name", "field", "value"),
    [
        ("chat gpt-4o", "request_model", "gpt-4o"),
        ("embeddings text-embedding-3-small", "request_model", "text-embedding-3-small"),
        ("execute_tool get_weather", "tool_name", "get_weather"),
        ("invoke_agent Support Bot", "agent_name", "Support Bot"),
        ("create_agent Math Tutor", "agent_name", "Math Tutor"),
    ],
)
def test_span_name_fallback(span_name: str, field: str, value: str) -> None:
    fields = genai_fields(span_name, {})
    assert fields.operation == span_name.split(" ")[0]
    assert getattr(fields, field) == value


def test_span_name_target_does_not_override_attributes() -> None:
    fields = genai_fields(
        "execute_tool shown_name",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "real_name"},
    )
    assert fields.tool_name == "real_name"


def test_span_name_target_is_ignored_when_it_names_another_operation() -> None:
    fields = genai_fields("chat gpt-4o", {"gen_ai.operation.name": "invoke_agent"})
    assert fields.operation == "invoke_agent"
    assert (fields.request_model, fields.agent_name) == ("", "")


def test_span_name_that_is_not_an_operation_leaves_operation_empty() -> None:
    fields = genai_fields("GET /health", {})
    assert fields.operation == ""
    assert fields.request_model == ""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(42, 42), ("42", 42), (" 7 ", 7), (12.0, 12), ("12.0", 12), (0, 0), (2**64 - 1, 2**64 - 1)],
)
def test_token_counts_parse_numbers_and_numeric_strings(raw: object, expected: int) -> None:
    assert genai_fields("x", {"gen_ai.usage.input_tokens": raw}).input_tokens == expected


@pytest.mark.parametrize("raw", ["many", "1.5", 2.5, True, [1], -1, "-3", 2**64, -2.0])
def test_token_counts_that_are_not_integers_are_absent(raw: object) -> None:
    assert genai_fields("x", {"gen_ai.usage.input_tokens": raw}).input_tokens is None


def test_total_tokens_beyond_the_store_column_are_absent() -> None:
    big = {"gen_ai.usage.input_tokens": 2**64 - 1, "gen_ai.usage.output_tokens": 1}
    assert genai_fields("x", big).total_tokens is None


@pytest.mark.parametrize(
    ("raw", "expected"), [(7, 7), (2**32 - 1, 2**32 - 1), (2**32, None), (-1, None)]
)
def test_replay_index_is_a_uint32_or_absent(raw: int, expected: int | None) -> None:
    assert eval_context({"pathgrade.replay.index": raw}).replay_index == expected


def test_total_tokens_absent_when_one_side_is_unknown() -> None:
    assert genai_fields("x", {"gen_ai.usage.input_tokens": 5}).total_tokens is None


def test_non_string_text_values_become_json_text() -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    fields = genai_fields("x", {"gen_ai.input.messages": messages, "gen_ai.tool.call.id": 5})
    assert json.loads(fields.input_messages) == messages
    assert fields.tool_call_id == "5"


def test_error_type_is_read_from_error_type_only() -> None:
    assert genai_fields("x", {"error.type": "rate_limited"}).error_type == "rate_limited"
    assert genai_fields("x", {"exception.type": "ValueError"}).error_type == ""


def test_eval_context_reads_pathgrade_attributes() -> None:
    context = eval_context(
        {
            genai.PG_DATASET_ITEM_ID: "item-3",
            genai.PG_RUN_ID: "run-1",
            genai.PG_REPLAY_INDEX: "2",
            genai.PG_VARIANT_ID: "b",
            genai.PG_SUITE_VERSION: "v7",
        }
    )
    assert (context.dataset_item_id, context.run_id, context.replay_index) == ("item-3", "run-1", 2)
    assert (context.variant_id, context.suite_version) == ("b", "v7")
    assert eval_context({}).replay_index is None


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("gen_ai.input.messages", True),
        ("gen_ai.tool.call.arguments", True),
        ("input.value", True),
        ("traceloop.entity.output", True),
        ("gen_ai.prompt.3.content", True),
        ("llm.output_messages.0.message.content", True),
        ("gen_ai.request.model", False),
        ("gen_ai.usage.input_tokens", False),
        ("llm.model_name", False),
    ],
)
def test_is_content_key(key: str, expected: bool) -> None:
    assert genai.is_content_key(key) is expected


def test_tool_and_message_content_keys_do_not_overlap() -> None:
    assert not genai.TOOL_CONTENT_KEYS & genai.MESSAGE_CONTENT_KEYS


def test_openllmetry_association_session_is_the_conversation() -> None:
    fields = genai_fields(
        "support.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "support-agent",
            "traceloop.association.properties.session_id": "conv-42",
        },
    )
    assert fields.operation == "invoke_agent"
    assert fields.conversation_id == "conv-42"


@pytest.mark.parametrize(
    ("span_name", "attributes"),
    [
        ("chat gpt-4o", {genai.INPUT_MESSAGES: "[]", genai.RESPONSE_FINISH_REASONS: ["stop"]}),
        ("execute_tool lookup", {"input.value": '{"a": 1}', "output.value": "ok"}),
        ("ChatCompletion", {"openinference.span.kind": "LLM", "input.value": "hi",
                            "llm.output_messages.0.message.role": "assistant",
                            "llm.output_messages.0.message.content": "hello"}),
        ("x", {"traceloop.span.kind": "tool", "traceloop.entity.input": "{}"}),
    ],
)  # fmt: skip
def test_content_fields_are_the_content_part_of_the_genai_view(
    span_name: str, attributes: dict
) -> None:
    full, content = genai_fields(span_name, attributes), content_fields(span_name, attributes)
    for name in ("operation", "tool_arguments", "tool_result", "input_messages",
                 "output_messages", "finish_reasons"):  # fmt: skip
        assert getattr(content, name) == getattr(full, name), name
    assert content.operation and not content.request_model and not content.tool_name


@pytest.mark.parametrize(
    "attributes",
    [
        {"openinference.span.kind": "LLM",
         "llm.input_messages.0.message.role": "user",
         "llm.input_messages.0.message.content": b"hi \xff",
         "llm.input_messages.1.message.role": "tool",
         "llm.input_messages.1.message.tool_call_id": b"c1",
         "llm.input_messages.1.message.content": ["ok", b"bytes", {"k": b"v"}],
         "llm.output_messages.0.message.role": "assistant",
         "llm.output_messages.0.message.contents.0.message_content.text": b"done",
         "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "f",
         "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": b'{"a"',
         "llm.output_messages.0.message.finish_reason": "stop"},
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": '[{"role": "user"}]',
         "gen_ai.prompt": "ignored: the key's text wins",
         "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": 1.5},
    ],
)  # fmt: skip
def test_rebuilt_messages_are_their_json_text_parsed(attributes: dict) -> None:
    viewed, rebuilt = content_view("chat", attributes, input_arguments=True)
    fields = content_fields("chat", attributes)
    for messages, text, viewed_text in (
        (rebuilt.inputs, fields.input_messages, viewed.input_messages),
        (rebuilt.outputs, fields.output_messages, viewed.output_messages),
    ):
        assert (messages, viewed_text) == ((json.loads(text), "") if messages else ([], text))
    assert viewed.finish_reasons == fields.finish_reasons


def test_rebuilt_inputs_leave_tool_call_arguments_out_unless_asked_for() -> None:
    """The outputs' requested calls keep their arguments (facts fingerprint them); the
    inputs' (the conversation so far, repeated by every call) only when asked for."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.prompt.0.role": "assistant",
        "gen_ai.prompt.0.tool_calls.0.id": "c1",
        "gen_ai.prompt.0.tool_calls.0.name": "refund",
        "gen_ai.prompt.0.tool_calls.0.arguments": '{"order": 7}',
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "c2",
        "gen_ai.completion.0.tool_calls.0.name": "refund",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"order": 8}',
    }
    rebuilt = content_view("chat", attributes)[1]
    asked = content_view("chat", attributes, input_arguments=True)[1]
    (call,) = rebuilt.inputs[0]["parts"]
    (with_arguments,) = asked.inputs[0]["parts"]
    assert call == {"type": "tool_call", "id": "c1", "name": "refund"}
    assert with_arguments == {**call, "arguments": {"order": 7}}
    requested = {"type": "tool_call", "id": "c2", "name": "refund", "arguments": {"order": 8}}
    assert rebuilt.outputs[0]["parts"] == asked.outputs[0]["parts"] == [requested]
