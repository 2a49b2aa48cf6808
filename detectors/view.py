"""`TraceView`: per-trace indexes built once and shared by every detector, and the context."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pathgrade.detectors.conventions import WRITE_EFFECTS, Conventions, ToolEffect
from pathgrade.detectors.messages import (
    RequestedToolCall,
    message_text,
    message_tool_calls,
    parse_json,
    parse_messages,
)
from pathgrade.detectors.prices import PriceTable, shipped_price_table
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span, Trace
from pathgrade.schemas.turns import ConfirmedAction, TurnDigest


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One execute_tool span with its arguments parsed once and its effect resolved."""

    span: Span
    name: str
    arguments: dict[str, Any] | None  # None when not captured or not a JSON object
    effect: ToolEffect | None
    idempotency_key: str
    agent_name: str
    signature: str | None  # name + canonical arguments (idempotency args excluded)

    @property
    def is_write(self) -> bool:
        return self.effect in WRITE_EFFECTS

    @property
    def failed(self) -> bool:
        return self.span.status_code == "Error" or bool(self.span.genai.error_type)


class TraceView:
    """Indexes over one trace (one turn): root, tool calls, chat spans, final answer."""

    def __init__(self, trace: Trace, conventions: Conventions) -> None:
        self.trace = trace
        self.conventions = conventions
        self.root: Span | None = trace.root
        self.chat_spans: list[Span] = [
            s for s in trace.spans if s.genai.operation in genai.MODEL_OPERATIONS
        ]
        self._by_id = {s.span_id: s for s in trace.spans}
        self.tool_calls: list[ToolCall] = [
            self._tool_call(s) for s in trace.spans if s.genai.operation == genai.OP_EXECUTE_TOOL
        ]

    @property
    def trace_id(self) -> str:
        return self.trace.trace_id

    @property
    def root_span_id(self) -> str:
        return self.root.span_id if self.root else ""

    def root_attribute(self, name: str) -> Any:
        """An attribute of the root span, or None."""
        return self.root.attributes.get(name) if self.root else None

    @cached_property
    def turn_kind(self) -> str:
        """`pathgrade.turn.kind` of the root span ("action", "read") or "" when absent."""
        value = self.root_attribute(genai.PG_TURN_KIND)
        return value if isinstance(value, str) else ""

    @cached_property
    def session_identity(self) -> str:
        """The session identity attribute from the root span, else any span; "" when absent."""
        attribute = self.conventions.identity.attribute
        for span in ([self.root] if self.root else []) + self.trace.spans:
            value = span.attributes.get(attribute, span.resource_attributes.get(attribute))
            if value not in (None, ""):
                return str(value)
        return ""

    @cached_property
    def confirmed_actions(self) -> list[ConfirmedAction]:
        """The confirmation recorded on this turn's root span (zero or one)."""
        value = parse_json(str(self.root_attribute(genai.PG_CONFIRMED_ACTION) or ""))
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return []
        arguments = value.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        return [ConfirmedAction(name=value["name"], arguments=arguments)]

    @cached_property
    def final_answer(self) -> str | None:
        """The final response text: the root agent's output, else the last model output.

        "" when content was captured but the run ended without a text answer (last model
        output asked for tools); None when no output content was captured at all.
        """
        if self.root and self.root.genai.output_messages:
            return _assistant_text(parse_messages(self.root.genai.output_messages))
        for span in sorted(self.chat_spans, key=lambda s: s.end_ns, reverse=True):
            messages = parse_messages(span.genai.output_messages)
            if messages:
                if any(message_tool_calls(m) for m in messages):
                    return ""
                return _assistant_text(messages)
        return None

    @cached_property
    def requested_tool_calls(self) -> list[tuple[Span, RequestedToolCall]]:
        """Tool calls requested in model output messages, with the requesting span."""
        return [
            (span, call)
            for span in self.chat_spans
            for message in parse_messages(span.genai.output_messages)
            for call in message_tool_calls(message)
        ]

    @cached_property
    def tool_definitions(self) -> dict[str, dict[str, Any]]:
        """Tool JSON Schemas from `gen_ai.tool.definitions` on model spans: name -> schema."""
        schemas: dict[str, dict[str, Any]] = {}
        for span in self.chat_spans:
            raw = span.attributes.get(genai.TOOL_DEFINITIONS)
            definitions = parse_json(raw) if isinstance(raw, str) else raw
            for definition in definitions if isinstance(definitions, list) else []:
                if isinstance(definition, dict):
                    function = definition.get("function", definition)
                    name, schema = function.get("name"), function.get("parameters")
                    if isinstance(name, str) and isinstance(schema, dict):
                        schemas[name] = schema
        return schemas

    def agent_of(self, span: Span) -> str:
        """The agent that ran `span`: its own agent name, else its nearest agent ancestor's."""
        current: Span | None = span
        while current is not None:
            if current.genai.agent_name:
                return current.genai.agent_name
            current = self._by_id.get(current.parent_span_id)
        return ""

    def _tool_call(self, span: Span) -> ToolCall:
        parsed = parse_json(span.genai.tool_arguments)
        arguments = parsed if isinstance(parsed, dict) else None
        idempotency = self.conventions.idempotency
        key = span.attributes.get(idempotency.attribute) or next(
            (arguments[a] for a in idempotency.arguments if arguments and a in arguments), ""
        )
        name = span.genai.tool_name or span.name
        signature = None
        if arguments is not None:
            payload = {k: v for k, v in arguments.items() if k not in idempotency.arguments}
            signature = name + json.dumps(payload, sort_keys=True, default=str)
        return ToolCall(
            span=span,
            name=name,
            arguments=arguments,
            effect=self.conventions.tools.effect_of(
                name, span.attributes.get(genai.PG_TOOL_EFFECT)
            ),
            idempotency_key=str(key),
            agent_name=self.agent_of(span),
            signature=signature,
        )


def _assistant_text(messages: list[dict[str, Any]]) -> str:
    texts = [message_text(m) for m in messages if m.get("role", "assistant") == "assistant"]
    return "\n".join(t for t in texts if t)


def turn_digest(view: TraceView, conversation_id: str) -> TurnDigest:
    """What later turns of the conversation may know about the turn `view` indexes."""
    trace = view.trace
    return TurnDigest(
        tenant=trace.tenant,
        conversation_id=conversation_id,
        trace_id=trace.trace_id,
        start_ns=trace.spans[0].start_ns if trace.spans else 0,
        succeeded_tools=[c.name for c in view.tool_calls if not c.failed],
        confirmed_actions=view.confirmed_actions,
    )


@dataclass(slots=True)
class DetectorContext:
    """What a detector may know beyond the trace: earlier turns, conventions, price table.

    `history` holds digests of earlier turns of the same conversation, oldest first,
    bounded by the caller (`turn_digest`: a detector reads earlier turns only through
    what a digest carries).
    """

    conventions: Conventions = field(default_factory=Conventions)
    prices: PriceTable = field(default_factory=shipped_price_table)
    history: list[TurnDigest] = field(default_factory=list)
    _view: TraceView | None = None  # the view of the last trace asked for

    def view_of(self, trace: Trace) -> TraceView:
        """The view of `trace` under these conventions (built once per trace)."""
        if self._view is None or self._view.trace is not trace:
            self._view = TraceView(trace, self.conventions)
        return self._view
