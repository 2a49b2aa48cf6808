"""The hand-off stories (issue 44): a triage agent and a billing agent, what the user says,
what the scripted model answers step by step for whichever agent it is asked as, and the
detectors each story must raise (none: a clean hand-off).

Pure standard library: the scripted model (in the test process) and each framework's app
(in the framework's own environment, where pathgrade is not installed) import it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

CUSTOMER = "cust-1001"
OTHER_CUSTOMER = "cust-2002"
AGENTS = ("triage", "billing")
HANDOFF_PREFIX = "transfer_to_"
INVERSES = {"close_ticket": "open_ticket"}
"""The policy's `inverses` (PG120)."""
AGENT_MARK = "You are the {agent} agent of a telecom company."
"""Each agent's instructions: the scripted model tells the agents apart by them."""


def instructions(agent: str) -> str:
    return AGENT_MARK.format(agent=agent) + " Use the tools; hand the customer over when asked."


@dataclass(frozen=True)
class Step:
    """One model reply: the agent asked, and a tool call (a hand-off is the call of
    `transfer_to_<agent>`) or the answer."""

    agent: str
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str = ""


def handoff(sender: str, receiver: str) -> Step:
    return Step(sender, HANDOFF_PREFIX + receiver)


def call(agent: str, tool: str, **arguments: Any) -> Step:
    return Step(agent, tool, arguments)


def answer(agent: str, text: str) -> Step:
    return Step(agent, answer=text)


@dataclass(frozen=True)
class Story:
    """A user turn, the model's steps and the detectors that must alert."""

    name: str
    user_text: str
    steps: tuple[Step, ...]
    expected: tuple[str, ...] = ()
    identity_at_handoff: str | None = CUSTOMER
    """The user identity the app runs the receiving agent under after the first hand-off
    (None: none at all)."""

    @property
    def clean(self) -> bool:
        return not self.expected


ME = {"customer_id": CUSTOMER}
STORIES: dict[str, Story] = {
    story.name: story
    for story in (
        Story(
            "clean_handoff",
            "What plan am I on right now?",
            (
                handoff("triage", "billing"),
                call("billing", "get_account", **ME),
                answer("billing", "You are on the Plus plan."),
            ),
        ),
        Story(
            "redo",
            "Why is my bill higher this month?",
            (
                call("triage", "get_account", **ME),
                handoff("triage", "billing"),
                call("billing", "get_account", **ME),
                answer("billing", "Your promotion ended this month."),
            ),
            expected=("PG119",),
        ),
        Story(
            "undo",
            "Please open a ticket about my bill.",
            (
                call("triage", "open_ticket", **ME, reason="bill higher"),
                handoff("triage", "billing"),
                call("billing", "close_ticket", **ME),
                answer("billing", "All sorted."),
            ),
            expected=("PG120",),
        ),
        Story(
            "lost_identity",
            "Can you check my latest invoice?",
            (
                call("triage", "get_account", **ME),
                handoff("triage", "billing"),
                answer("billing", "Your latest invoice is 40 dollars."),
            ),
            expected=("PG121",),
            identity_at_handoff=None,
        ),
        Story(
            "ping_pong",
            "I want to dispute a charge on my bill.",
            (
                handoff("triage", "billing"),
                handoff("billing", "triage"),
                handoff("triage", "billing"),
                answer("billing", "I can help with the dispute."),
            ),
            expected=("PG122",),
        ),
        Story(
            "asked_again",
            "Please change my plan to Basic.",
            (
                call("triage", "get_account", **ME),
                handoff("triage", "billing"),
                answer("billing", "Could you give me your account number?"),
            ),
            expected=("PG121",),
        ),
    )
}


def tool_result(tool: str, arguments: dict[str, Any]) -> str:
    """What the app's tool `tool` returns."""
    if tool == "get_account":
        return json.dumps({"customer_id": arguments.get("customer_id"), "plan": "plus"})
    return json.dumps({"ok": True, "tool": tool})


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def reply_step(messages: list[dict[str, Any]]) -> tuple[Story, int, str] | None:
    """For an OpenAI chat-completions message list: the story (the last user message that
    names one), how many assistant replies came since (the step), and the agent asked (its
    instructions); None for a request that names no story."""
    agent = next(
        (a for m in messages for a in AGENTS if AGENT_MARK.format(agent=a) in message_text(m)),
        "",
    )
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        story = next((s for s in STORIES.values() if s.user_text in message_text(message)), None)
        if story is not None and message.get("role") == "user":
            replies = [m for m in messages[position + 1 :] if m.get("role") == "assistant"]
            return story, len(replies), agent
    return None
