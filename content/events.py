"""GenAI events of a turn, read in one place whatever carries them.

An event arrives as a span event (`Span.events`) or as an OTLP log record tied to its span
by trace and span id (`Span.records`, joined by the consumer: `join_records`); OpenTelemetry
deprecates span events for records (OTEP 4430). Every reader here takes the events of both
carriers, so a message is a message whether a span attribute, a span event or a log record
carried it (`genai.GENAI_CONVENTIONS` pins the conventions read):

- `event_messages`: the GenAI messages an event carries, as `gen_ai.input.messages` /
  `gen_ai.output.messages` objects (role, parts): `gen_ai.client.inference.operation.details`
  (an inference's messages as the attributes `gen_ai.input.messages`,
  `gen_ai.output.messages`, `gen_ai.system_instructions`, structured or JSON text, with
  `gen_ai.response.finish_reasons`), and the older per-message events whose body holds the
  message (`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`,
  `gen_ai.tool.message`: an input message each; `gen_ai.choice`: an output message). The
  collector computes a record's facts from them (`collector.redact`), the consumer fills a
  span's GenAI view with them when content is captured (`join_records`).
- `tool_call_decisions`: the `gen_ai.tool.call.decision` events (semantic-conventions-genai
  pull request #535, proposed and not merged): an explicit decision on a proposed tool call
  before it runs, `gen_ai.tool.call.decision.outcome` allow / deny / require_approval,
  correlated with the call by `gen_ai.tool.call.id` (and naming the tool,
  `gen_ai.tool.name`, when the producer knows it).
- `evaluation_results`: `gen_ai.evaluation.result` events (a score an evaluator gave the
  span they are tied to).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from pathgrade.content import otlp
from pathgrade.schemas import genai
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.model import LogRecord, Span

_INPUT_ROLES = {
    genai.EVENT_SYSTEM_MESSAGE: "system",
    genai.EVENT_USER_MESSAGE: "user",
    genai.EVENT_ASSISTANT_MESSAGE: "assistant",
    genai.EVENT_TOOL_MESSAGE: "tool",
}
"""The older per-message events that carry one input message in their body, and its role."""
MESSAGE_EVENTS = frozenset({genai.EVENT_INFERENCE_DETAILS, genai.EVENT_CHOICE, *_INPUT_ROLES})
"""Events `event_messages` reads messages from."""


FINISH_REASON = "finish_reason"
"""An output message's member naming why the model stopped."""


class MessagesText(NamedTuple):
    """Messages a record carries as a structured value (an array of maps), read by the OTLP
    reader straight from the value's bytes (`read_messages`): the JSON text `messages_json`
    writes of them, and each one's `finish_reason` (None where it has none). Only the
    collector reads values so; a consumer's records hold lists."""

    text: str
    finish_reasons: list[Any]


Messages = list[dict[str, Any]] | MessagesText
"""GenAI message objects, or their JSON text where the OTLP reader wrote it."""


def read_messages(value: AnyValue) -> MessagesText | None:
    """An array of maps as `MessagesText` (JSON text written in C from its bytes, no Python
    objects made); None for another value, one the reader leaves to Python
    (`otlp.structured_value` reads it then) or without the reader."""
    if otlp.messages_json is None or value.WhichOneof("value") != "array_value":
        return None
    written = otlp.messages_json(value.SerializeToString(), FINISH_REASON)
    return None if written is None else MessagesText(*written)


class EventMessages(NamedTuple):
    """The messages one event carries: input and output messages as GenAI message objects
    (`{"role", "parts": [...]}`, an output's `finish_reason`; `MessagesText` where the
    collector read them so), system instructions as parts, and the finish reasons."""

    inputs: Messages
    outputs: Messages
    system: list[dict[str, Any]]
    finish_reasons: list[str]

    def __bool__(self) -> bool:
        return bool(self.inputs or self.outputs or self.system)


NO_MESSAGES = EventMessages([], [], [], [])


def event_messages(name: str, attributes: Mapping[str, Any], body: Any = None) -> EventMessages:
    """The messages event `name` carries in its `attributes` and `body` (NO_MESSAGES for
    an event of another name, or whose content was dropped)."""
    if name == genai.EVENT_INFERENCE_DETAILS:
        outputs = _objects(attributes.get(genai.OUTPUT_MESSAGES))
        reasons = _strings(attributes.get(genai.RESPONSE_FINISH_REASONS)) or _finish_reasons(
            outputs
        )
        return EventMessages(
            _objects(attributes.get(genai.INPUT_MESSAGES)),
            outputs,
            _objects(attributes.get(genai.SYSTEM_INSTRUCTIONS)),
            reasons,
        )
    if not isinstance(body, dict):
        return NO_MESSAGES
    role = _INPUT_ROLES.get(name)
    if role is not None:
        return EventMessages([_message(role, body)], [], [], [])
    if name == genai.EVENT_CHOICE:
        choice = body.get("message")
        message = _message("assistant", choice if isinstance(choice, dict) else {})
        reason = body.get(FINISH_REASON)
        if reason:
            message[FINISH_REASON] = str(reason)
        return EventMessages([], [message], [], [str(reason)] if reason else [])
    return NO_MESSAGES


def messages_json(messages: Messages) -> str:
    """GenAI message objects as the JSON text of `gen_ai.*.messages` ("" for none)."""
    if isinstance(messages, MessagesText):
        return messages.text
    return json.dumps(messages, ensure_ascii=False, default=str) if messages else ""


def _finish_reasons(outputs: Messages) -> list[str]:
    """The finish reasons output messages name, in their order."""
    named = (
        outputs.finish_reasons
        if isinstance(outputs, MessagesText)
        else [m.get(FINISH_REASON) for m in outputs]
    )
    return [str(reason) for reason in named if reason]


def _message(role: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A per-message event's body (`content`, `tool_calls`, a tool message's `id`) as a
    GenAI message object of `role` (the body's own role wins)."""
    role = str(body.get("role") or role)
    content = body.get("content")
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": str(body.get("id") or ""),
                      "response": content if content is not None else ""})  # fmt: skip
    elif content not in (None, ""):
        parts.append({"type": "text", "content": content})
    for call in body.get("tool_calls") or ():
        if isinstance(call, dict):
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            parts.append({
                "type": "tool_call", "id": str(call.get("id") or ""),
                "name": str(function.get("name") or call.get("name") or ""),
                "arguments": function.get("arguments", call.get("arguments")),
            })  # fmt: skip
    return {"role": role, "parts": parts}


def _objects(value: Any) -> Messages:
    """Message or part objects from an attribute value: structured (a list of maps, as
    records carry them; `MessagesText` as it is) or its JSON text (as spans do)."""
    if isinstance(value, MessagesText):
        return value
    if isinstance(value, str):
        value = parse_json(value)
    if isinstance(value, dict):
        value = [value]
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return [value] if isinstance(value, str) and value else []


def join_records(span: Span, records: list[LogRecord]) -> None:
    """Tie `records` (every record of the span known so far, any order) to `span`: its
    `records` in time order, its facts read again with theirs (`Span.facts`) and, when the
    span's own attributes carry no messages and the records carry captured ones, its GenAI
    view's input and output messages from the records (in time order). Called again with
    more records, it gives the same span as one call with all of them."""
    span.records = sorted(records, key=_record_order)
    span._facts = None
    fields = span.genai
    if span._content_from_records:
        fields.input_messages = fields.output_messages = ""
        fields.finish_reasons = []
    if fields.input_messages or fields.output_messages:
        return
    carried = [m for r in span.records if (m := event_messages(r.event_name, r.attributes, r.body))]
    inputs = [m for c in carried for m in c.inputs]
    outputs = [m for c in carried for m in c.outputs]
    if not inputs and not outputs:
        span._content_from_records = False
        return
    fields.input_messages = messages_json(inputs)
    fields.output_messages = messages_json(outputs)
    fields.finish_reasons = fields.finish_reasons or [r for c in carried for r in c.finish_reasons]
    span._content_from_records = True


def _record_order(record: LogRecord) -> tuple[int, int]:
    return record.at_ns, record.observed_ns


class CarriedEvent(NamedTuple):
    """An event of a span, whichever carrier brought it: its time, name and attributes,
    the span, and whether a log record carried it."""

    time_ns: int
    name: str
    attributes: Mapping[str, Any]
    span: Span
    record: bool


def span_events(spans: Iterable[Span]) -> Iterator[CarriedEvent]:
    """Every event of `spans`: their span events, then the records tied to them."""
    for span in spans:
        for event in span.events:
            yield CarriedEvent(event.time_ns, event.name, event.attributes, span, False)
        for record in span.records:
            yield CarriedEvent(record.at_ns, record.event_name, record.attributes, span, True)


class ToolCallDecision(NamedTuple):
    """One decision on a proposed tool call, and the span whose event recorded it."""

    time_ns: int
    outcome: str  # allow, deny or require_approval
    tool_call_id: str  # "" when the producer did not know it
    tool_name: str  # "" likewise
    span_id: str


def tool_call_decisions(spans: Iterable[Span]) -> list[ToolCallDecision]:
    """The tool-call decisions recorded on `spans` (as span events or log records), in
    time order; an event whose outcome is not one of the three is not a decision."""
    found = []
    for event in span_events(spans):
        if event.name != genai.EVENT_TOOL_CALL_DECISION:
            continue
        attributes = event.attributes
        outcome = attributes.get(genai.TOOL_CALL_DECISION_OUTCOME)
        if outcome not in genai.DECISION_OUTCOMES:
            continue
        call_id = _text(attributes.get(genai.TOOL_CALL_ID))
        tool = _text(attributes.get(genai.TOOL_NAME))
        found.append(
            ToolCallDecision(event.time_ns, str(outcome), call_id, tool, event.span.span_id)
        )
    found.sort()
    return found


class EvaluationResult(NamedTuple):
    """A `gen_ai.evaluation.result` event: an evaluator's score of the span it is tied to."""

    time_ns: int
    name: str
    score: float | None
    label: str
    span_id: str


def evaluation_results(spans: Iterable[Span]) -> list[EvaluationResult]:
    """The evaluation results recorded on `spans` (either carrier), in time order; an event
    without `gen_ai.evaluation.name` is none."""
    found = []
    for event in span_events(spans):
        if event.name != genai.EVENT_EVALUATION_RESULT:
            continue
        attributes = event.attributes
        name = _text(attributes.get(genai.EVALUATION_NAME))
        if not name:
            continue
        score = attributes.get(genai.EVALUATION_SCORE_VALUE)
        number = isinstance(score, int | float) and not isinstance(score, bool)
        value = float(score) if number else None
        label = _text(attributes.get(genai.EVALUATION_SCORE_LABEL))
        found.append(EvaluationResult(event.time_ns, name, value, label, event.span.span_id))
    found.sort(key=lambda result: (result.time_ns, result.span_id, result.name))
    return found


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
