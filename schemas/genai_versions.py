"""The GenAI conventions' versions pathgrade reads, as data: what each renamed, added or
removed since the one before, and how pathgrade reads it.

pathgrade first read v1.26.0 of open-telemetry/semantic-conventions (2024-07) and reads
every version since, up to the one pinned in `genai.GENAI_CONVENTIONS`, at once: an older
attribute name is read where its newer one is missing (`older_names`: the GenAI mapping's
chains and the collector's allow-list take them from here), older events are read as the
newer ones (`content.events`), so a turn written to any of these versions maps onto the
same GenAI view. Each version has a fixture, a turn written to it
(tests/fixtures/genai_versions/), and the tests map every fixture onto that one view.
docs/collector.md ("GenAI convention versions") is generated from `VERSIONS`.

Sources: the CHANGELOG of open-telemetry/semantic-conventions (v1.28.0, v1.37.0), its
`model/gen-ai/deprecated/registry-deprecated.yaml`, and the changelog fragments and JSON
schemas of open-telemetry/semantic-conventions-genai (where the GenAI conventions moved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from pathgrade.schemas import genai as g

Kind = Literal["attribute", "event", "operation", "part type"]


@dataclass(frozen=True, slots=True)
class Change:
    """One name a version changed: `old` renamed to `new` (`old` "" when added, `new` ""
    when removed without a replacement), and how pathgrade reads it."""

    kind: Kind
    old: str
    new: str
    reading: str


@dataclass(frozen=True, slots=True)
class ConventionVersion:
    """A version of the GenAI conventions, where its text is, and what it changed since
    the version before it (for the first, the names pathgrade read then)."""

    version: str
    source: str
    changes: tuple[Change, ...]


GENAI_VERSION: Final = "genai-2026-10"
"""The short name of the version pinned in `genai.GENAI_CONVENTIONS` (the last of `VERSIONS`)."""
ALIAS = "the old name read where the new one is missing"
VERSIONS: Final = (
    ConventionVersion(
        "1.26.0",
        "open-telemetry/semantic-conventions v1.26.0 (2024-07): the first version pathgrade read",
        (
            Change("attribute", "", "gen_ai.system", "the provider, as `gen_ai.provider.name`"),
            Change("attribute", "", "gen_ai.usage.prompt_tokens", "input tokens"),
            Change("attribute", "", "gen_ai.usage.completion_tokens", "output tokens"),
            Change(
                "event",
                "",
                g.EVENT_CONTENT_PROMPT,
                "content (dropped unless captured); its messages are not read",
            ),
            Change(
                "event",
                "",
                g.EVENT_CONTENT_COMPLETION,
                "content (dropped unless captured); its messages are not read",
            ),
        ),
    ),
    ConventionVersion(
        "1.28.0",
        "open-telemetry/semantic-conventions v1.28.0",
        (
            Change("attribute", "gen_ai.usage.prompt_tokens", g.USAGE_INPUT_TOKENS, ALIAS),
            Change("attribute", "gen_ai.usage.completion_tokens", g.USAGE_OUTPUT_TOKENS, ALIAS),
            Change(
                "attribute",
                g.PROMPT_DEPRECATED,
                "",
                "content; read as the input messages when none other is there",
            ),
            Change(
                "attribute",
                g.COMPLETION_DEPRECATED,
                "",
                "content; read as the output messages when none other is there",
            ),
            Change(
                "event",
                g.EVENT_CONTENT_PROMPT,
                g.EVENT_USER_MESSAGE,
                "per-message events (also `gen_ai.system.message`, "
                "`gen_ai.assistant.message`, `gen_ai.tool.message`): a message each, "
                "span event or log record",
            ),
            Change(
                "event",
                g.EVENT_CONTENT_COMPLETION,
                g.EVENT_CHOICE,
                "an output message, span event or log record",
            ),
        ),
    ),
    ConventionVersion(
        "1.37.0",
        "open-telemetry/semantic-conventions v1.37.0 (2025-08)",
        (
            Change("attribute", "gen_ai.system", g.PROVIDER_NAME, ALIAS),
            Change("attribute", "gen_ai.openai.request.seed", "gen_ai.request.seed", ALIAS),
            Change(
                "attribute", "gen_ai.openai.request.response_format", "gen_ai.output.type", ALIAS
            ),
            Change(
                "event",
                g.EVENT_USER_MESSAGE,
                g.EVENT_INFERENCE_DETAILS,
                "the per-message events give way to `gen_ai.input.messages`, "
                "`gen_ai.output.messages`, `gen_ai.system_instructions` on the span or "
                "on this event (a log record); both read",
            ),
            Change("attribute", "", g.INPUT_MESSAGES, "the input messages (content)"),
            Change("attribute", "", g.OUTPUT_MESSAGES, "the output messages (content)"),
            Change("attribute", "", g.SYSTEM_INSTRUCTIONS, "system instructions (content)"),
            Change(
                "attribute",
                "",
                g.TOOL_DEFINITIONS,
                "tool definitions: the schemas PG104 checks tool arguments against",
            ),
        ),
    ),
    ConventionVersion(
        GENAI_VERSION,
        g.GENAI_CONVENTIONS,
        (
            Change(
                "attribute",
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.usage.cache_write.input_tokens",
                "kept (allow-listed under `gen_ai.usage.`); no detector reads it",
            ),
            Change(
                "attribute",
                "",
                "gen_ai.usage.cache_read.input_tokens",
                "kept (allow-listed); no detector reads it",
            ),
            Change(
                "attribute",
                "",
                "gen_ai.usage.reasoning.output_tokens",
                "kept (allow-listed); no detector reads it",
            ),
            Change("operation", "", g.OP_INVOKE_WORKFLOW, "the top of a turn"),
            Change(
                "operation",
                "",
                g.OP_HANDLE_CONVERSATION_TURN,
                "the top of a turn (a turn handler's own span)",
            ),
            Change(
                "part type",
                "",
                "generic",
                "a part of a type the conventions do not name (GenericPart): its text "
                "`content` is message text, as a `text` part's (`messages.message_text`)",
            ),
            Change("part type", "", "reasoning", "not message text (the model's reasoning)"),
            Change("event", "", g.EVENT_EVALUATION_RESULT, "an evaluator's score of its span"),
            Change(
                "event",
                "",
                g.EVENT_TOOL_CALL_DECISION,
                "pull request #535 as proposed (not merged): PG111's approval signal",
            ),
        ),
    ),
)
"""Oldest first; the last is the version pinned in `genai.GENAI_CONVENTIONS`."""

ATTRIBUTE_RENAMES: Final[dict[str, str]] = {
    change.old: change.new
    for version in VERSIONS
    for change in version.changes
    if change.kind == "attribute" and change.old and change.new
}
"""Old attribute name -> the name that replaced it."""


def older_names(name: str) -> tuple[str, ...]:
    """The names attribute `name` had in earlier versions, newest first."""
    found: list[str] = []
    current = [name]
    while current:
        current = [old for old, new in ATTRIBUTE_RENAMES.items() if new in current]
        found.extend(current)
    return tuple(found)
