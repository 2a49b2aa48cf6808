"""The lexicons of content predicates, as data: what instruction-like text, a claim of a
completed action and a question asking the user for a value look like (named regular
expressions, with the literals every match contains), and the bounds of an argument
skeleton. One definition for the collector, which evaluates them on raw content and
records the names found as facts (`schemas.facts`), and the detectors, which evaluate them
on captured text; the matching is `content.predicates`'.

A lexicon's version is part of the facts contract (`schemas.facts.FACTS_VERSION`): a new
entry or a changed expression is a new version.
"""

from __future__ import annotations

from typing import Final

INSTRUCTION_LEXICON: Final[dict[str, str]] = {
    "ignore_instructions": (
        r"\bignore (all |any )?(the )?(previous|prior|above) (instructions|messages)"
    ),
    "addressed_to_agent": (
        r"\b(you|the assistant|the agent|ai assistants?) (must|should|need to|are required to)\b"
    ),
    "action_request": (
        r"\b(reset|reboot|restart|delete|cancel|refund|transfer|disable|upgrade|downgrade"
        r"|change|update|send|close|open) (the|this|your|all|my|their)\b"
    ),
    "role_spoofing": r"^\s*(system|assistant)\s*:",
    "concealment": r"\bdo not (tell|inform|notify) the user\b",
}
"""Name -> regular expression of instruction-like text (PG117's default lexicon)."""

INSTRUCTION_ANCHORS: Final[dict[str, tuple[str, ...]]] = {
    "ignore_instructions": ("ignore ",),
    "addressed_to_agent": (" must", " should", " need to", " are required to"),
    "action_request": (" the", " this", " your", " all", " my", " their"),
    "role_spoofing": ("system", "assistant"),
    "concealment": ("do not ",),
}
"""Name -> literals (lower-case) one of which every match of the entry's expression
contains; kept beside the expressions they are read from (a changed expression changes
its anchors; tests/unit/content/test_predicates.py checks them on adversarial text)."""

CLAIM_PREFIX: Final = r"\b(?:i|we)(?:'ve| have|'ve just| have just| just)?\s+(?:successfully\s+)?"
CLAIM_LEXICON: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "cancel": (r"cancell?ed", ("cancel",)),
    "refund": (r"refunded|issued (?:a|the|your) refund", ("refund",)),
    "reset": (r"reset|rebooted|restarted", ("reset", "reboot", "restart")),
    "change": (
        r"changed|updated|switched|upgraded|downgraded|modified",
        ("change", "update", "switch", "upgrade", "downgrade", "modify", "set"),
    ),
    "ticket": (
        r"(?:opened|created|filed|raised|logged) (?:a|the|your) (?:ticket|case|dispute)",
        ("ticket", "case", "dispute"),
    ),
    "send": (r"sent|emailed", ("send", "email", "notify")),
    "book": (r"booked|scheduled|reserved", ("book", "schedule", "reserve")),
    "delete": (r"deleted|removed", ("delete", "remove")),
    "transfer": (r"transferred", ("transfer",)),
}
"""Name -> (claim verb expression after "I have"/"we've", tool-name fragments that back
it) (PG116's default lexicon)."""

CLAIM_ANCHORS: Final[dict[str, tuple[str, ...]]] = {
    "cancel": ("cancel",),
    "refund": ("refund",),
    "reset": ("reset", "rebooted", "restarted"),
    "change": ("changed", "updated", "switched", "upgraded", "downgraded", "modified"),
    "ticket": ("ticket", "case", "dispute"),
    "send": ("sent", "emailed"),
    "book": ("booked", "scheduled", "reserved"),
    "delete": ("deleted", "removed"),
    "transfer": ("transferred",),
}
"""Name -> literals (lower-case) one of which every match of that claim contains (as
`INSTRUCTION_ANCHORS`; checked by the same tests)."""

ASK_PREFIX: Final = (
    r"\b(?:what(?:'s| is| are)|which|could you|can you|would you|will you|please"
    r"|may i (?:have|ask for)|i(?: will|'ll)? need|tell me)\b[^.?!\n]{0,60}?"
)
ASK_LEXICON: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "account": (
        r"\b(?:account|customer|member(?:ship)?)\s*(?:number|id\b|no\b|#)",
        ("account", "customer", "member"),
    ),
    "order": (r"\border\s*(?:number|id\b|no\b|#)", ("order",)),
    "email": (r"\be-?mail(?: address)?\b", ("email", "mail")),
    "phone": (r"\b(?:phone|mobile)(?: number)?\b", ("phone", "mobile")),
    "ticket": (r"\b(?:ticket|case)\s*(?:number|id\b|no\b|#)", ("ticket", "case")),
}
"""Slot -> (what a question asking for it says after "could you ..." / "what is ...",
argument-name fragments of a call that holds a value for it) (PG121's default lexicon)."""

ASK_ANCHORS: Final[dict[str, tuple[str, ...]]] = {
    "account": ("account", "customer", "member"),
    "order": ("order",),
    "email": ("mail",),
    "phone": ("phone", "mobile"),
    "ticket": ("ticket", "case"),
}
"""Slot -> literals (lower-case) one of which every match of that question contains (as
`INSTRUCTION_ANCHORS`; checked by the same tests)."""

SKELETON_MAX_DEPTH: Final = 8
SKELETON_MAX_ITEMS: Final = 64
"""Bounds of an argument skeleton: deeper levels and further items are cut (`truncated`)."""
