"""The fact kernel fingerprints the arguments of the tool calls a model requested as the
Python fact maker does (`facts_producer._output_fact`): the same output fact from either,
the kernel deciding JSON arguments itself and leaving arguments text that is not JSON to
Python."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pathgrade.collector.facts import DECLINED_FALLBACK
from pathgrade.collector.redact import RedactionConfig
from pathgrade.schemas import facts as f
from pathgrade.schemas import genai

from tests.unit.collector.test_facts_kernel import (
    CONFIGS,
    SECRET,
    _assert_same,
    _body,
    _both,
    _maker,
    _spans,
)

WANTED = {"customer_id": "cust-2", "note": "mail jane@example.com"}


def _openai(arguments: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "get_account"}}
    if arguments is not None:
        call["function"]["arguments"] = arguments
    messages = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    return {genai.OPERATION_NAME: "chat", genai.OUTPUT_MESSAGES: json.dumps(messages)}


def _parts(arguments: Any) -> dict[str, Any]:
    part = {"type": "tool_call", "id": "c1", "name": "get_account", "arguments": arguments}
    messages = [{"role": "assistant", "parts": [part]}]
    return {genai.OPERATION_NAME: "chat", genai.OUTPUT_MESSAGES: json.dumps(messages)}


DECIDED = {
    "openai text": _openai(json.dumps(WANTED)),
    "openai empty": _openai(""),
    "openai absent": _openai(None),
    "openai not an object": _openai("[1, 2]"),
    "parts object": _parts(WANTED),
    "parts text": _parts(json.dumps(WANTED)),
    "parts bound arguments": _parts({"args": [], "kwargs": WANTED}),
    "parts wrapper text": _parts(json.dumps({"input_str": "x", "inputs": WANTED})),
    "parts scalar": _parts(7),
}
"""Requested calls whose arguments the kernel reads itself."""
TO_PYTHON = {
    "openai not json": _openai("{customer_id: cust-2}"),
    "openai NaN": _openai('{"amount": NaN}'),
    "parts big integer text": _parts('{"n": 123456789012345678901}'),
}
"""Arguments text the kernel leaves to Python (not JSON, or JSON it does not read)."""


@pytest.mark.parametrize("config_name", list(CONFIGS))
def test_requested_arguments_get_the_same_facts_from_the_kernel_and_python(
    config_name: str,
) -> None:
    spans = [(f"chat {name}", attributes) for name, attributes in {**DECIDED, **TO_PYTHON}.items()]
    _assert_same([_body(*spans)], CONFIGS[config_name])


def test_the_kernel_decides_json_arguments_and_leaves_other_text_to_python() -> None:
    maker = _maker(RedactionConfig(), native=True)
    for name, attributes in DECIDED.items():
        assert isinstance(
            maker.request_facts(_body(("chat", attributes)), "acme", True)[0], bytes
        ), name
    for name, attributes in TO_PYTHON.items():
        answers = maker.request_facts(_body(("chat", attributes)), "acme", True)
        assert answers == [DECLINED_FALLBACK], name


def test_the_kernel_writes_fingerprints_of_the_requested_arguments_never_their_values() -> None:
    key = SECRET.for_tenant("acme")
    by_kernel, _ = _both([_body(("chat", DECIDED["openai text"]))], RedactionConfig())
    (span,) = _spans(by_kernel[0])
    attributes = {kv.key: kv.value for kv in span.attributes}
    (call,) = json.loads(attributes[f.OUTPUT].string_value)["tool_calls"]
    assert call["args"] == {name: key.fingerprint(value) for name, value in WANTED.items()}
    assert call["fp"] == key.fingerprint(WANTED)
    encoded = by_kernel[0].SerializeToString()
    assert b"cust-2" not in encoded and b"jane@example.com" not in encoded
