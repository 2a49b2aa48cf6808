"""Canonical traces for detector tests: a builder of one agent turn, a clean refund turn,
and helpers that run one detector or build a conversation's history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pathgrade.detectors import REGISTRY, Finding
from pathgrade.detectors.conventions import Conventions
from pathgrade.detectors.view import DetectorContext, TraceView, turn_digest
from pathgrade.schemas import genai
from pathgrade.schemas.model import (
    SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK,
    SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK,
    GenAIFields,
    Span,
    SpanEvent,
    Trace,
)

REMOTE_PARENT = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
LOCAL_PARENT = SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK


class TraceBuilder:
    """Builds one agent turn: a root invoke_agent span with chat and tool spans under it."""

    def __init__(
        self,
        trace_id: str = "a" * 32,
        *,
        turn_kind: str | None = "action",
        identity: str | None = "cust-1",
        answer: str | None = "All done.",
        agent: str = "support-agent",
        root_attributes: dict[str, Any] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.clock = 1_000
        self.spans: list[Span] = []
        self.parent: Span | None = None  # where new spans go (None: under the root)
        attributes = dict(root_attributes or {})
        if turn_kind is not None:
            attributes[genai.PG_TURN_KIND] = turn_kind
        if identity is not None:
            attributes[genai.ENDUSER_ID] = identity
        output = _messages([_text(answer)]) if answer is not None else ""
        self.root = self._span(
            "invoke_agent " + agent,
            GenAIFields(operation="invoke_agent", agent_name=agent, output_messages=output),
            attributes,
            parent="",
        )

    def chat(
        self,
        *,
        calls: list[tuple[str, str] | tuple[str, str, Any]] = (),  # type: ignore[assignment]
        text: str | None = None,
        tokens: tuple[int | None, int | None] = (100, 20),
        model: str = "gpt-4o-mini",
        finish: tuple[str, ...] = ("stop",),
        attributes: dict[str, Any] | None = None,
        input_messages: list[dict[str, Any]] | None = None,
    ) -> Span:
        """A chat span requesting `calls` ((call id, tool name[, arguments], {} when not
        given)) and/or answering `text`."""
        parts = [
            {"type": "tool_call", "id": c[0], "name": c[1], "arguments": (*c, {})[2]} for c in calls
        ]
        if text is not None:
            parts.append(_text(text))
        fields = GenAIFields(
            operation="chat",
            provider_name="openai",
            request_model=model,
            response_model=model,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            finish_reasons=list(finish),
            output_messages=_messages(parts) if parts else "",
            input_messages=json.dumps(input_messages) if input_messages else "",
        )
        return self._span("chat " + model, fields, attributes or {})

    def tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        call_id: str = "",
        effect: str | None = None,
        result: str = "",
        error: str = "",
        idempotency_key: str = "",
        agent: str = "",
        attributes: dict[str, Any] | None = None,
    ) -> Span:
        """An execute_tool span; `arguments=None` means arguments were not captured."""
        attributes = dict(attributes or {})
        if effect:
            attributes[genai.PG_TOOL_EFFECT] = effect
        if idempotency_key:
            attributes[genai.PG_IDEMPOTENCY_KEY] = idempotency_key
        fields = GenAIFields(
            operation="execute_tool",
            tool_name=name,
            tool_call_id=call_id,
            tool_arguments=json.dumps(arguments) if arguments is not None else "",
            tool_result=result,
            error_type=error,
            agent_name=agent,
        )
        span = self._span("execute_tool " + name, fields, attributes)
        if error:
            span.status_code = "Error"
        return span

    def agent(self, name: str, attributes: dict[str, Any] | None = None) -> Span:
        """An invoke_agent span of a sub-agent (a node of the agent graph) under the root
        (or the span of the enclosing `inside` block)."""
        return self._span(
            "invoke_agent " + name,
            GenAIFields(operation="invoke_agent", agent_name=name),
            dict(attributes or {}),
        )

    def handoff(self, target: str, sender: str = "") -> Span:
        """OpenInference's handoff span (OpenAI Agents SDK): `handoff to <target>`, its
        input the sending agent's name."""
        fields = GenAIFields(operation="execute_tool", tool_arguments=sender, tool_result=target)
        return self._span("handoff to " + target, fields, {})

    @contextmanager
    def inside(self, span: Span) -> Iterator[Span]:
        """Spans added in the block are children of `span`, which ends after them."""
        previous, self.parent = self.parent, span
        try:
            yield span
        finally:
            self.parent = previous
            span.end_ns = self.clock
            self.clock += 20

    def build(self) -> Trace:
        self.root.end_ns = self.clock + 10
        return Trace("default", self.trace_id, list(self.spans))

    def _span(
        self, name: str, fields: GenAIFields, attributes: dict[str, Any], parent: str = "r"
    ) -> Span:
        span_id = f"{len(self.spans) + 1:016x}"
        span = Span(
            tenant="default",
            trace_id=self.trace_id,
            span_id=span_id,
            parent_span_id=(self.parent or self.root).span_id if parent else "",
            name=name,
            kind="Internal",
            start_ns=self.clock,
            end_ns=self.clock + 10,
            attributes=attributes,
            genai=fields,
        )
        self.clock += 20
        self.spans.append(span)
        return span


def in_server_span(trace: Trace, attributes: dict[str, Any] | None = None) -> Trace:
    """`trace` (one agent turn, its root the agent span) inside an HTTP server span
    `POST /chat` whose parent is remote (a gateway's, exported elsewhere), with
    `attributes` on the server span; the whole trace, as the realtime plane receives it."""
    root = trace.root
    assert root is not None
    server = Span(
        tenant=trace.tenant, trace_id=trace.trace_id, span_id="5e" * 8,
        parent_span_id="9a" * 8, name="POST /chat", kind="Server",
        start_ns=root.start_ns - 5, end_ns=root.end_ns + 5, attributes=dict(attributes or {}),
        flags=REMOTE_PARENT,
    )  # fmt: skip
    root.parent_span_id, root.flags = server.span_id, LOCAL_PARENT
    return Trace(trace.tenant, trace.trace_id, [server, *trace.spans])


def decision(span: Span, outcome: str, call_id: str = "", tool: str = "", at: int = 0) -> None:
    """A `gen_ai.tool.call.decision` span event on `span` (at its start, else `at`)."""
    attributes = {genai.TOOL_CALL_DECISION_OUTCOME: outcome}
    if call_id:
        attributes[genai.TOOL_CALL_ID] = call_id
    if tool:
        attributes[genai.TOOL_NAME] = tool
    span.events.append(SpanEvent(at or span.start_ns, genai.EVENT_TOOL_CALL_DECISION, attributes))


def _text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _messages(parts: list[dict[str, Any]]) -> str:
    return json.dumps([{"role": "assistant", "parts": parts}])


def detect(
    code: str,
    trace: Trace,
    params: dict[str, Any] | list[Any] | None = None,
    context: DetectorContext | None = None,
) -> list[Finding]:
    """Run the one detector `code` with `params` over `trace`."""
    rule = REGISTRY[code]
    context = context or DetectorContext()
    assert rule.function is not None
    return rule.function(
        TraceView(trace, context.conventions), rule.params.model_validate(params or {}), context
    )


def history_of(*earlier: Trace) -> DetectorContext:
    """A detector context whose history is the digests of the `earlier` turns."""
    return DetectorContext(history=[turn_digest(TraceView(t, Conventions()), "c") for t in earlier])


def clean_refund_trace(trace_id: str = "a" * 32) -> Trace:
    """A well-behaved 10-span turn: lookup, confirm-free write, final answer."""
    b = TraceBuilder(trace_id, answer="I have refunded order ORD-123456 to your card.")
    b.chat(calls=[("c1", "lookup_order")])
    b.tool(
        "lookup_order",
        {"order_id": "ORD-123456", "customer_id": "cust-1"},
        call_id="c1",
        effect="read",
        result='{"status": "delivered"}',
    )
    b.chat(calls=[("c2", "get_policy")])
    b.tool("get_policy", {"topic": "refunds"}, call_id="c2", effect="read", result="30 days")
    b.chat(calls=[("c3", "issue_refund")])
    b.tool(
        "issue_refund",
        {"order_id": "ORD-123456", "customer_id": "cust-1", "amount": 20},
        call_id="c3",
        effect="write",
        idempotency_key="k1",
    )
    b.chat(calls=[("c4", "send_receipt")])
    b.tool("send_receipt", {"order_id": "ORD-123456"}, call_id="c4", effect="read")
    b.chat(text="I have refunded order ORD-123456 to your card.")
    return b.build()
