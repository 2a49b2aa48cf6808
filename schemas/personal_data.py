"""The kinds of personal data pathgrade finds in text and the marks that replace them in
what the collector forwards (`[REDACTED:email]`, ...): names of the wire contract, counted
by kind in facts (`schemas.facts`); the finding is `content.pii`'s."""

from __future__ import annotations

from typing import Final

EMAIL: Final = "email"
CARD: Final = "card"
PATTERN: Final = "pattern"
KINDS: Final = (EMAIL, CARD, PATTERN)
EMAIL_MARK: Final = "[REDACTED:email]"
CARD_MARK: Final = "[REDACTED:card]"
PATTERN_MARK: Final = "[REDACTED]"
MARKS: Final = {EMAIL: EMAIL_MARK, CARD: CARD_MARK, PATTERN: PATTERN_MARK}

Counts = dict[str, int]
"""Kind of personal data -> how many were found."""
