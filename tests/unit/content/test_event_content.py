"""Content in GenAI span events (content.event_content): Strands Agents' message events,
with Bedrock content blocks, read as the GenAI attributes that hold it today."""

from __future__ import annotations

import json

from pathgrade.content.event_content import event_content, has_message_events
from pathgrade.content.messages import message_tool_calls, parse_messages, typed_text
from pathgrade.schemas import genai

USE = {"toolUse": {"toolUseId": "c1", "name": "change_plan", "input": {"plan": "basic"}}}
RESULT = {"toolResult": {"toolUseId": "c1", "status": "success", "content": [{"text": "ok"}]}}


def test_a_model_calls_events_are_its_input_and_output_messages() -> None:
    events = [
        (genai.EVENT_SYSTEM_MESSAGE, {"content": json.dumps([{"text": "Be brief."}])}),
        (genai.EVENT_USER_MESSAGE, {"content": json.dumps([{"text": "Switch me to Basic."}])}),
        (genai.EVENT_ASSISTANT_MESSAGE, {"content": json.dumps([USE])}),
        (genai.EVENT_TOOL_MESSAGE, {"content": json.dumps([RESULT])}),
        (genai.EVENT_CHOICE, {"finish_reason": "end_turn", "message": '[{"text": "Done."}]'}),
        ("exception", {"exception.message": "not content"}),
    ]
    found = event_content("chat", events)
    inputs = parse_messages(found[genai.INPUT_MESSAGES])
    assert [m["role"] for m in inputs] == ["system", "user", "assistant", "tool"]
    assert typed_text(inputs[1]) == "Switch me to Basic."
    assert [(c.call_id, c.name) for c in message_tool_calls(inputs[2])] == [("c1", "change_plan")]
    assert inputs[3]["parts"] == [{"type": "tool_call_response", "id": "c1", "response": "ok"}]
    (output,) = parse_messages(found[genai.OUTPUT_MESSAGES])
    assert typed_text(output) == "Done."


def test_a_tool_spans_events_are_its_arguments_and_result() -> None:
    events = [
        (genai.EVENT_TOOL_MESSAGE, {"role": "tool", "content": '{"plan": "basic"}', "id": "c1"}),
        (genai.EVENT_CHOICE, {"message": json.dumps([{"text": '{"ok": true}'}]), "id": "c1"}),
    ]
    assert event_content("execute_tool", events) == {
        genai.TOOL_CALL_ARGUMENTS: '{"plan": "basic"}',
        genai.TOOL_CALL_RESULT: '{"ok": true}',
    }


def test_an_agents_plain_text_answer_and_spans_that_are_not_read() -> None:
    answer = [(genai.EVENT_CHOICE, {"message": "You are on Plus.\n"})]
    (output,) = parse_messages(event_content("invoke_agent", answer)[genai.OUTPUT_MESSAGES])
    assert typed_text(output) == "You are on Plus.\n"
    assert event_content("execute_event_loop_cycle", answer) == {}  # a framework's loop
    assert event_content("chat", [("exception", {"message": "x"})]) == {}
    assert has_message_events(["exception", genai.EVENT_CHOICE])
    assert not has_message_events(["exception"])
