"""How the collector forwards one attribute, by its key: the verdicts the redactor gives
(`Redactor.forwarding`) and the fact kernel reads back for the spans it writes whole."""

from __future__ import annotations

from enum import IntEnum


class Forwarding(IntEnum):
    """One attribute key's verdict."""

    CONTENT = 0
    """Content or identity: dropped unless captured."""
    CONTEXT = 1
    """Read raw by the capture policy and facts, forwarded scrubbed (all are allowed keys)."""
    FACT = 2
    """A fact a producer set: scrubbed, its fingerprints kept."""
    ALLOWED = 3
    """Allowed: forwarded scrubbed."""
    IDENTIFIER = 4
    """An allowed identifier: forwarded as it is, or as its fingerprint when scrubbing would
    change it."""
    WITHHELD = 5
    """Not allowed: the value travels as its mark."""
    KEY_WITHHELD = 6
    """A key that does not look like one, or holds personal data: it and its value travel
    as their marks."""
    MEMBERS = 7
    """A JSON object of which only named structural members are allowed
    (`allowed_keys.ALLOWED_MEMBERS`): forwarded as those members, scrubbed; the rest is
    dropped."""
