"""A small rule-based customer-support agent with seeded defects, for the release gate.

`healthy` is the good build. Each broken build carries one deliberate defect, and the
suite (`suite.yaml`) over the golden dataset (`golden.jsonl`) must fail it on the metrics
that should catch it (`CATCHING_METRICS`):

- `renamed_argument`: the `lookup_order` tool schema renamed `order_id` to `order_number`;
  caught by argument_correctness.
- `skipped_confirmation`: the prompt lost the "confirm before acting" step; caught by
  trajectory_match, tool_correctness and the refund items' `ordering` check.
- `stale_index`: the knowledge-base retriever reads a stale index; caught by
  reference_match.
- `eager_ticket`: opens a support ticket nobody asked for while answering an order-status
  question (a write on a read turn); caught by PG110 `orphan-write` and so by `sound`
  (and trajectory_match: the path has a call too many).
- `plan_guard`: a guard refuses plans outside its bounds, and its bounds hold only
  `basic`, so "switch my plan to premium" is refused. Nothing unsafe happened (`sound`
  passes) but the account did not end on the plan asked for: `goal_completed`, read from
  the sandbox, fails (and the path metrics, the answer and the unmade calls).
- `placeholder_reference`: refunds answer with the placeholder reference `ORD-12345`
  (five digits); caught by the refund items' `answer_regex` check `ORD-\\d{6}`.
- `reasks_account`: a double charge is handed from the support agent, which looked the
  account up, to the billing agent; this build's billing agent does the refund but then
  asks the user for the account number the support agent already had (the hand-off lost
  it). The answer, the path and the end state are right: only the hand-off row catches
  it, PG121 `handoff-context-lost`.

Every build is an object with `respond(conversation_state, user_message, context)` and
`end_state(conversation_state, context)` (`pathgrade eval suite.yaml --agent
examples/seeded_defects/agent.py:healthy`). It emits its own OpenTelemetry GenAI spans
through the global tracer provider: an `invoke_agent` root (with `pathgrade.turn.kind`:
`action` when the user asks for a change, else `read`), one `chat` span and one
`execute_tool` span per tool call; a double charge also runs a nested `invoke_agent
billing-agent` (the support agent delegates to it) with its own `chat` span and calls.
Its writes land in a sandbox account per attempt (run, item, repeat: read from the
`pathgrade.*` baggage), which `end_state` returns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import baggage, trace

AGENT_NAME = "support-agent"
BILLING_AGENT = "billing-agent"
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
PLACEHOLDER_REFERENCE = "ORD-12345"
ATTEMPT_BAGGAGE = ("pathgrade.run.id", "pathgrade.dataset.item_id", "pathgrade.replay.index")
"""The baggage entries pathgrade sets during an attempt, which key its sandbox account."""


@dataclass(frozen=True)
class Build:
    """How one build of the agent behaves."""

    order_argument: str = "order_id"  # the lookup_order schema's argument name
    confirms: bool = True  # asks for confirmation before a change
    knowledge_base: dict[str, str] | None = None  # None: the current index
    opens_tickets: bool = False  # opens a ticket on order-status questions too
    allowed_plans: tuple[str, ...] = ("basic", "premium")  # the plan guard's bounds
    placeholder_reference: bool = False  # refunds answer with ORD-12345
    reasks_account: bool = False  # billing asks for the account it was handed


@dataclass(frozen=True)
class Handoff:
    """The billing agent's part of a turn: its calls and its answer."""

    calls: list[Call]
    answer: str


Call = tuple[str, dict[str, Any]]


def _reference(order: str) -> str:
    """The refund reference of an order: `ORD-` and six digits."""
    return f"ORD-{100000 + int(order[1:]):06d}"


def billing(build: Build, message: str) -> tuple[list[Call], Handoff] | None:
    """A double charge: the support agent looks the account up and hands it to the billing
    agent, which refunds the duplicate; None for any other message."""
    account = re.search(r"\bAC-\d{4}\b", message)
    if "charged twice" not in message.lower() or not account:
        return None
    answer = f"Refunded the duplicate charge on account {account[0]}."
    if build.reasks_account:
        answer += " Could you give me your account number so I can send the receipt?"
    return [("lookup_account", {"account_id": account[0]})], Handoff(
        [("refund_duplicate", {"account_id": account[0]})], answer
    )


def plan(build: Build, message: str) -> tuple[list[Call], str]:
    """The tool calls the build makes for a user message, and its answer."""
    text = message.lower()
    order = re.search(r"\b[A-Z]\d{4}\b", message)
    confirm: list[Call] = []
    if "refund" in text and order:
        if build.confirms:
            confirm = [("request_confirmation", {"action": "issue_refund", "order_id": order[0]})]
        reference = PLACEHOLDER_REFERENCE if build.placeholder_reference else _reference(order[0])
        return [*confirm, ("issue_refund", {"order_id": order[0]})], (
            f"Refund issued for order {order[0]}. Reference {reference}."
        )
    if "plan" in text:
        tier = "premium" if "premium" in text else "basic"
        if tier not in build.allowed_plans:
            return [], f"Sorry, I cannot switch you to the {tier} plan."
        if build.confirms:
            confirm = [("request_confirmation", {"action": "change_plan", "plan": tier})]
        return [*confirm, ("change_plan", {"plan": tier})], f"Your plan is now {tier}."
    if order:
        status = ORDERS.get(order[0], "unknown")
        ticket = [("open_ticket", {"order_id": order[0]})] if build.opens_tickets else []
        return [("lookup_order", {build.order_argument: order[0]}), *ticket], (
            f"Order {order[0]} is {status}."
        )
    topic = "router" if "router" in text else "modem"
    articles = build.knowledge_base or KB_CURRENT
    return [("search_kb", {"query": f"reset {topic}"})], articles[topic]


@dataclass
class Sandbox:
    """The accounts the agent's writes land in, one per attempt."""

    accounts: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)

    def account(self) -> dict[str, Any]:
        """The current attempt's account (run, item, repeat from the baggage)."""
        entries = baggage.get_all()
        key = tuple(str(entries.get(name, "")) for name in ATTEMPT_BAGGAGE)
        return self.accounts.setdefault(key, {"plan": "basic", "refunds": [], "tickets": []})

    def apply(self, tool: str, arguments: dict[str, Any]) -> None:
        """The effect of one write on the current attempt's account."""
        account = self.account()
        if tool == "issue_refund":
            account["refunds"].append(next(iter(arguments.values())))
        elif tool == "change_plan":
            account["plan"] = arguments["plan"]
        elif tool == "open_ticket":
            account["tickets"].append(arguments["order_id"])
        elif tool == "refund_duplicate":
            account["refunds"].append(arguments["account_id"])


SANDBOX = Sandbox()


def respond(build: Build, message: str) -> dict[str, Any]:
    """Answer one user turn, emitting the turn's GenAI spans and applying its writes."""
    tracer = trace.get_tracer("examples.seeded_defects")
    handed = billing(build, message)
    calls, answer = (handed[0], "") if handed else plan(build, message)
    wants_change = any(word in message.lower() for word in ("refund", "plan", "charged"))
    user = {"user.id": handed[0][0][1]["account_id"]} if handed else {}  # whose account
    with tracer.start_as_current_span(
        f"invoke_agent {AGENT_NAME}",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT_NAME,
                    "gen_ai.provider.name": PROVIDER,
                    "pathgrade.turn.kind": "action" if wants_change else "read", **user},
    ):  # fmt: skip
        _model_call(tracer, message, answer or "Handing you to billing.")
        _tool_calls(tracer, calls)
        if handed:
            with tracer.start_as_current_span(
                f"invoke_agent {BILLING_AGENT}",
                attributes={"gen_ai.operation.name": "invoke_agent",
                            "gen_ai.agent.name": BILLING_AGENT, "gen_ai.provider.name": PROVIDER,
                            **user},
            ):  # fmt: skip
                answer = handed[1].answer
                _model_call(tracer, message, answer)
                _tool_calls(tracer, handed[1].calls, first=len(calls))
    return {"response": answer, "done": True}


def _model_call(tracer: trace.Tracer, message: str, answer: str) -> None:
    """One `chat` span: the user's message in, `answer` out."""
    with tracer.start_as_current_span(
        f"chat {MODEL}",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": MODEL, "gen_ai.response.model": MODEL,
            "gen_ai.usage.input_tokens": 200, "gen_ai.usage.output_tokens": 50,
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": message}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
        },
    ):  # fmt: skip
        pass


def _tool_calls(tracer: trace.Tracer, calls: list[Call], first: int = 0) -> None:
    """One `execute_tool` span per call (ids `call-<n>` from `first`), each write applied."""
    for number, (tool, arguments) in enumerate(calls, start=first):
        with tracer.start_as_current_span(
            f"execute_tool {tool}",
            attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"call-{number}", "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": json.dumps(arguments),
            },
        ):  # fmt: skip
            SANDBOX.apply(tool, arguments)


class SupportAgent:
    """One build as an agent: answers turns, and shows its sandbox after an attempt."""

    def __init__(self, build: Build) -> None:
        self.build = build

    def respond(self, conversation_state: dict[str, Any], user_message: str,
                context: Any) -> dict[str, Any]:  # fmt: skip
        return respond(self.build, user_message)

    def end_state(self, conversation_state: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"account": SANDBOX.account()}


healthy = SupportAgent(Build())
renamed_argument = SupportAgent(Build(order_argument="order_number"))
skipped_confirmation = SupportAgent(Build(confirms=False))
stale_index = SupportAgent(Build(knowledge_base=KB_STALE))
eager_ticket = SupportAgent(Build(opens_tickets=True))
plan_guard = SupportAgent(Build(allowed_plans=("basic",)))
placeholder_reference = SupportAgent(Build(placeholder_reference=True))
reasks_account = SupportAgent(Build(reasks_account=True))

BUILDS = {
    "healthy": healthy,
    "renamed_argument": renamed_argument,
    "skipped_confirmation": skipped_confirmation,
    "stale_index": stale_index,
    "eager_ticket": eager_ticket,
    "plan_guard": plan_guard,
    "placeholder_reference": placeholder_reference,
    "reasks_account": reasks_account,
}
CATCHING_METRICS: dict[str, set[str]] = {
    "healthy": set(),
    "renamed_argument": {"argument_correctness"},
    "skipped_confirmation": {"trajectory_match", "tool_correctness", "checks"},
    "stale_index": {"reference_match"},
    "eager_ticket": {"PG110", "sound", "trajectory_match"},
    "plan_guard": {
        "goal_completed",
        "trajectory_match",
        "tool_correctness",
        "argument_correctness",
        "reference_match",
    },
    "placeholder_reference": {"checks"},
    "reasks_account": {"PG121"},
}
"""The metrics each build must fail the gate on (and no others)."""
