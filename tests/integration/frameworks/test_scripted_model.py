"""The matrix's scripted model plays each story through the official OpenAI client, plain
and streamed, the way the frameworks' clients call it (no stack needed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from tests.integration.frameworks.scripted_model import ScriptedModel
from tests.integration.frameworks.stories import STORIES, Story

TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_account", "lookup_order", "search_kb", "change_plan", "open_dispute",
                 "reset_equipment")
]  # fmt: skip


@pytest.fixture(scope="module")
def client() -> Iterator[OpenAI]:
    with ScriptedModel() as model:
        yield OpenAI(base_url=model.url, api_key="scripted")


def play(client: OpenAI, story: Story, tools: list[dict[str, Any]], stream: bool) -> list[Any]:
    """Run `story` to its answer as an agent loop would: each tool call answered with a
    tool message. Returns the calls (name, arguments) then the answer (none when the
    answer came as the `final_answer` tool's call)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": story.user_text}]
    played: list[Any] = []
    for _ in range(10):
        if stream:
            chunks = list(client.chat.completions.create(
                model="m", messages=messages, tools=tools, stream=True))  # fmt: skip
            calls = [c.function for ch in chunks if ch.choices
                     for c in ch.choices[0].delta.tool_calls or []]  # fmt: skip
            text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 150
        else:
            reply = client.chat.completions.create(model="m", messages=messages, tools=tools)
            calls = [c.function for c in reply.choices[0].message.tool_calls or []]
            text = reply.choices[0].message.content or ""
        played += [(c.name, json.loads(c.arguments)) for c in calls]
        if not calls or calls[-1].name == "final_answer":
            return [*played, text] if not calls else played
        messages += [{"role": "assistant", "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls]}, {"role": "tool", "tool_call_id": "x", "content": "ok"}]  # fmt: skip
    raise AssertionError("the story never answered")


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("name", list(STORIES))
def test_each_story_plays_its_calls_then_its_answer(
    client: OpenAI, name: str, stream: bool
) -> None:
    story = STORIES[name]
    expected = [*((c.tool, c.arguments) for c in story.calls), story.answer]
    assert play(client, story, TOOLS, stream) == expected


def test_prefixed_tools_handoffs_and_final_answer_tools_are_followed(client: OpenAI) -> None:
    story = STORIES["cross_account"]
    prefixed = [{"type": "function", "function": {"name": f"support-{t['function']['name']}"}}
                for t in TOOLS]  # fmt: skip
    assert play(client, story, prefixed, False)[0][0] == "support-change_plan"
    handoff = [*TOOLS, {"type": "function", "function": {"name": "transfer_to_billing"}}]
    assert [c[0] for c in play(client, story, handoff, False)[:2]] == [
        "transfer_to_billing", "change_plan"]  # fmt: skip
    final = [*TOOLS, {"type": "function", "function": {"name": "final_answer"}}]
    assert play(client, story, final, False)[-1] == ("final_answer", {"answer": story.answer})
