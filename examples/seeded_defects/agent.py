"""A small rule-based customer-support agent with seeded defects, for the release gate.

`healthy` is the good build. Each broken build carries one deliberate defect, and the
suite (`suite.yaml`) over the golden dataset (`golden.jsonl`) must fail it on the metric
that should catch it:

- `renamed_argument`: the `lookup_order` tool schema renamed `order_id` to `order_number`;
  caught by argument_correctness.
- `skipped_confirmation`: the prompt lost the "confirm before acting" step; caught by
  trajectory_match (and tool_correctness: the confirmation call is missing).
- `stale_index`: the knowledge-base retriever reads a stale index; caught by
  reference_match.

Every build is an adapter function `(conversation_state, user_message, context) -> dict`
(`pathgrade eval suite.yaml --agent examples/seeded_defects/agent.py:healthy`). It emits
its own OpenTelemetry GenAI spans through the global tracer provider: an `invoke_agent`
root, one `chat` span and one `execute_tool` span per tool call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

AGENT_NAME = "support-agent"
MODEL = "gpt-4o-mini"
PROVIDER = "openai"

ORDERS = {"A1001": "shipped", "A1002": "delivered", "A1003": "processing", "A2001": "delivered",
          "A2002": "delivered"}  # fmt: skip
KB_CURRENT = {
    "router": "Hold the reset button for 10 seconds, then wait for the green light.",
    "modem": "Open Settings > Network and choose Restart modem.",
}
KB_STALE = {
    "router": "Unplug the router for 30 seconds and plug it back in.",
    "modem": "Call support to restart your modem.",
}


@dataclass(frozen=True)
class Build:
    """How one build of the agent behaves."""

    order_argument: str = "order_id"  # the lookup_order schema's argument name
    confirms: bool = True  # asks for confirmation before a change
    knowledge_base: dict[str, str] | None = None  # None: the current index


Call = tuple[str, dict[str, Any]]


def plan(build: Build, message: str) -> tuple[list[Call], str]:
    """The tool calls the build makes for a user message, and its answer."""
    text = message.lower()
    order = re.search(r"\b[A-Z]\d{4}\b", message)
    confirm: list[Call] = []
    if "refund" in text and order:
        if build.confirms:
            confirm = [("request_confirmation", {"action": "issue_refund", "order_id": order[0]})]
        return [*confirm, ("issue_refund", {"order_id": order[0]})], (
            f"Refund issued for order {order[0]}."
        )
    if "plan" in text:
        tier = "premium" if "premium" in text else "basic"
        if build.confirms:
            confirm = [("request_confirmation", {"action": "change_plan", "plan": tier})]
        return [*confirm, ("change_plan", {"plan": tier})], f"Your plan is now {tier}."
    if order:
        status = ORDERS.get(order[0], "unknown")
        return [("lookup_order", {build.order_argument: order[0]})], (
            f"Order {order[0]} is {status}."
        )
    topic = "router" if "router" in text else "modem"
    articles = build.knowledge_base or KB_CURRENT
    return [("search_kb", {"query": f"reset {topic}"})], articles[topic]


def respond(build: Build, message: str) -> dict[str, Any]:
    """Answer one user turn, emitting the turn's GenAI spans."""
    tracer = trace.get_tracer("examples.seeded_defects")
    calls, answer = plan(build, message)
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT_NAME}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
                    "gen_ai.provider.name": PROVIDER},
    ):  # fmt: skip
        with tracer.start_as_current_span(
            f"chat {MODEL}",
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": MODEL, "gen_ai.response.model": MODEL,
                "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 50,
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": message}]}]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
            },
        ):  # fmt: skip
            pass
        for number, (tool, arguments) in enumerate(calls):
            with tracer.start_as_current_span(
                f"execute_tool {tool}",
                attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.id": f"call-{number}", "gen_ai.tool.type": "function",
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                },
            ):  # fmt: skip
                pass
    return {"response": answer, "done": True}


def _build(build: Build) -> Callable[[dict[str, Any], str, Any], dict[str, Any]]:
    def agent(
        conversation_state: dict[str, Any], user_message: str, context: Any
    ) -> dict[str, Any]:
        return respond(build, user_message)

    return agent


healthy = _build(Build())
renamed_argument = _build(Build(order_argument="order_number"))
skipped_confirmation = _build(Build(confirms=False))
stale_index = _build(Build(knowledge_base=KB_STALE))

BUILDS = {
    "healthy": healthy,
    "renamed_argument": renamed_argument,
    "skipped_confirmation": skipped_confirmation,
    "stale_index": stale_index,
}
CATCHING_METRICS: dict[str, set[str]] = {
    "healthy": set(),
    "renamed_argument": {"argument_correctness"},
    "skipped_confirmation": {"trajectory_match", "tool_correctness"},
    "stale_index": {"reference_match"},
}
"""The metrics each build must fail the gate on (and no others)."""
