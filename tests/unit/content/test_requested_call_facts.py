"""The output fact's requested tool calls carry their arguments' fingerprints (`fp`,
`args`, as tool.args) when the arguments are an object, in either message shape and from
OpenInference's flattened output messages; never a value."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pathgrade.content.conventions import content_view
from pathgrade.content.facts_producer import compute_facts
from pathgrade.schemas import facts as f
from pathgrade.schemas import genai
from pathgrade.schemas.facts import ArgumentFacts, span_facts

from tests.support.privacy import KEY, SCANNER

WANTED = {"customer_id": "cust-2", "mail": "jane@example.com"}


def output_facts(attributes: dict[str, Any]) -> dict[str, Any]:
    """The output fact of a chat span with `attributes`, as the collector computes it."""
    fields, rebuilt = content_view("chat gpt", attributes)
    facts = compute_facts(fields, attributes, KEY, SCANNER, rebuilt=rebuilt)
    return json.loads(facts[f.OUTPUT])


def conventions_call(arguments: Any) -> dict[str, Any]:
    part = {"type": "tool_call", "id": "c1", "name": "get_account", "arguments": arguments}
    return {genai.OPERATION_NAME: "chat", genai.OUTPUT_MESSAGES: json.dumps(
        [{"role": "assistant", "parts": [part]}])}  # fmt: skip


def openai_call(arguments: Any) -> dict[str, Any]:
    call = {"id": "c1", "function": {"name": "get_account", "arguments": arguments}}
    return {genai.OPERATION_NAME: "chat", genai.OUTPUT_MESSAGES: json.dumps(
        [{"role": "assistant", "content": None, "tool_calls": [call]}])}  # fmt: skip


def openinference_call(arguments: str) -> dict[str, Any]:
    prefix = "llm.output_messages.0.message."
    return {
        genai.OI_SPAN_KIND: "LLM",
        prefix + "role": "assistant",
        prefix + "tool_calls.0.tool_call.id": "c1",
        prefix + "tool_calls.0.tool_call.function.name": "get_account",
        prefix + "tool_calls.0.tool_call.function.arguments": arguments,
    }


@pytest.mark.parametrize(
    "attributes",
    [
        conventions_call(WANTED),
        conventions_call(json.dumps(WANTED)),
        conventions_call({"args": [], "kwargs": WANTED}),
        openai_call(json.dumps(WANTED)),
        openinference_call(json.dumps(WANTED)),
    ],
    ids=["parts object", "parts text", "bound arguments", "openai", "openinference"],
)
def test_a_requested_call_carries_its_arguments_fingerprints(attributes: dict[str, Any]) -> None:
    (call,) = output_facts(attributes)["tool_calls"]
    assert call == {
        "id": "c1",
        "name": "get_account",
        "fp": KEY.fingerprint(WANTED),
        "args": {name: KEY.fingerprint(value) for name, value in WANTED.items()},
    }
    text = json.dumps(call)
    assert not any(value in text for value in WANTED.values())
    parsed = span_facts({f.OUTPUT: json.dumps({"text": False, "tool_calls": [call]})}).output
    assert parsed is not None
    assert parsed.tool_call_arguments == (ArgumentFacts(call["fp"], call["args"]),)


@pytest.mark.parametrize("arguments", ["cust-2", "", None, ["cust-2"], "{not json"])
def test_arguments_that_are_no_object_travel_as_nothing(arguments: Any) -> None:
    for attributes in (conventions_call(arguments), openai_call(arguments)):
        (call,) = output_facts(attributes)["tool_calls"]
        assert call == {"id": "c1", "name": "get_account"}
    parsed = span_facts({f.OUTPUT: json.dumps({"text": False, "tool_calls": [call]})}).output
    assert parsed is not None and parsed.tool_call_arguments == (None,)
