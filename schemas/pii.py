"""Personal data in text: one definition of what an e-mail address and a payment card look
like, shared by the collector (which scrubs every string it forwards) and the detectors
(PG115 on a captured final answer).

Text is normalised before matching, so encodings do not hide a value:
- percent-encoding is undone (twice at most: `%2540` is `%40` is `@`);
- Unicode text is NFKC-normalised (full-width digits and `＠`, non-breaking and ideographic
  spaces become ASCII), format characters (zero-width spaces, joiners) are removed and
  every other decimal digit (Arabic-Indic, Devanagari, ...) becomes its ASCII digit.
Plain ASCII text without `%` is matched as is (the common case costs nothing extra).

- e-mail: `local@domain.tld` with Unicode letters allowed in the local part and the domain
  (internationalised domains, also in their `xn--` form), sizes bounded as RFC 5321 does so
  the scan stays linear on hostile input;
- card: 13-19 digits that pass the Luhn check, the digits optionally separated by up to
  three characters of space, `.`, `/`, `+`, `-` or a Unicode dash (`4111 - 1111 ...`),
  with no ASCII letter or digit right before or after the run (a digit run inside a hex
  id such as `5f14ca83ce2508042088708e47` is part of the id, not a card); a
  number value (an integer, or a float holding an integer) is a card when its 13-19
  digits pass the Luhn check and start with a major industry identifier of banking and
  finance (2-6), so timestamps and ids in number attributes (which start with 1) are not
  taken for cards;
- pattern: a match of a configured extra regular expression.

`PiiScanner.scrub(text)` returns the text with each finding replaced by its mark
(`[REDACTED:email]`, `[REDACTED:card]`, `[REDACTED]`) and the count per kind; when nothing
is found the text is returned unchanged (not normalised).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final
from urllib.parse import unquote

from pathgrade.schemas.memo import BoundedMemo

EMAIL: Final = "email"
CARD: Final = "card"
PATTERN: Final = "pattern"
KINDS: Final = (EMAIL, CARD, PATTERN)
EMAIL_MARK: Final = "[REDACTED:email]"
CARD_MARK: Final = "[REDACTED:card]"
PATTERN_MARK: Final = "[REDACTED]"

Counts = dict[str, int]
"""Kind of personal data -> how many were found."""

# An address is found from its "@": the local part ends there, the domain starts after it.
_LOCAL_PART = re.compile(r"[\w.%+\-]{1,64}\Z")
_DOMAIN = re.compile(r"[\w\-]{1,63}(?:\.[\w\-]{1,63}){0,8}\.(?:[^\W\d_]{2,63}|xn--[\w\-]{1,59})")
CARD_MIN_DIGITS: Final = 13
CARD_MAX_DIGITS: Final = 19
_SEPARATOR = r"[\s./+\-\u2010-\u2015\u2212]"
# A run of 13-19 ASCII digits (after normalisation), with short separators between digits;
# the first digit comes first in the expression (the engine then skips to digits) and the
# look-behind checks that no digit or ASCII letter precedes it (nor follows the run).
_CARD_CANDIDATE = re.compile(
    rf"[0-9](?<![0-9A-Za-z]{{2}})(?:{_SEPARATOR}{{0,3}}[0-9]){{12,18}}(?![0-9A-Za-z])"
)
_ANY_DIGIT = re.compile(r"[0-9]")  # cheap pre-check before the card regex
# The pre-check of ASCII text: a card is a run of at least 13 digits and separators, so
# the text mapped byte by byte (digit or separator -> "0", anything else -> "x") holds 13
# "0"s in a row (one C-speed substring search instead of the regex over every digit).
_CARD_CHARACTER = re.compile(rf"[0-9]|{_SEPARATOR}")
CARD_RUN_MAP = bytes(
    ord("0") if _CARD_CHARACTER.fullmatch(chr(byte)) else ord("x") for byte in range(256)
)
_CARD_RUN = b"0" * CARD_MIN_DIGITS
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
_FORMAT_CHARACTERS = re.compile(r"[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_LUHN_DOUBLED = {str(d): (2 * d) // 10 + (2 * d) % 10 for d in range(10)}
_PAYMENT_INDUSTRIES = frozenset("23456")
_MAX_PERCENT_DECODES = 2
_MAX_REMEMBERED = 16_384
_MAX_REMEMBERED_CHARS = 256


def luhn_valid(digits: str) -> bool:
    """True when `digits` (ASCII digits only, at least two) passes the Luhn checksum."""
    if len(digits) < 2 or not digits.isascii() or not digits.isdigit():
        return False
    total = sum(map(int, digits[-1::-2])) + sum(map(_LUHN_DOUBLED.__getitem__, digits[-2::-2]))
    return total % 10 == 0


def normalise(text: str) -> str:
    """`text` as it is matched: percent-decoded, NFKC, format characters removed, decimal
    digits as ASCII (see the module doc); ASCII text without `%` is returned as is."""
    for _ in range(_MAX_PERCENT_DECODES):
        if "%" not in text:
            break
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)
    text = _FORMAT_CHARACTERS.sub("", text)
    return _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)


def card_number(value: int | float) -> bool:
    """True when a number attribute holds a plausible payment card (see the module doc)."""
    if isinstance(value, float):
        if not value.is_integer():
            return False
        value = int(value)
    digits = str(abs(value))
    return (
        CARD_MIN_DIGITS <= len(digits) <= CARD_MAX_DIGITS
        and digits[0] in _PAYMENT_INDUSTRIES
        and luhn_valid(digits)
    )


class PiiScanner:
    """Finds and replaces e-mail addresses, card numbers and the configured patterns; the
    outcome for short texts (names, ids, models repeat) is remembered, bounded."""

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        self.extra_patterns = [re.compile(pattern) for pattern in extra_patterns]
        self._remembered: BoundedMemo[str, tuple[str, Counts]] = BoundedMemo(_MAX_REMEMBERED)

    def scrub(self, text: str) -> tuple[str, Counts]:
        """`text` with every finding replaced by its mark, and the count per kind; the
        original `text` and {} when nothing was found."""
        if len(text) > _MAX_REMEMBERED_CHARS:
            return self._scrub(text)
        done = self._remembered.get(text)
        if done is None:
            done = self._remembered.put(text, self._scrub(text))
        return done

    def clean(self, text: str) -> str:
        """`text` scrubbed."""
        return self.scrub(text)[0]

    def find(self, text: str) -> Counts:
        """The count per kind of personal data in `text`."""
        return self.scrub(text)[1]

    def _scrub(self, text: str) -> tuple[str, Counts]:
        normal = normalise(text)
        counts: Counts = {}
        clean = normal
        if "@" in clean:
            clean, found = _replace_emails(clean)
            if found:
                counts[EMAIL] = found
        if len(clean) >= CARD_MIN_DIGITS and _may_hold_card(clean):
            replaced = _CardReplacer()
            clean = _CARD_CANDIDATE.sub(replaced, clean)
            if replaced.count:
                counts[CARD] = replaced.count
        for pattern in self.extra_patterns:
            clean, found = pattern.subn(PATTERN_MARK, clean)
            if found:
                counts[PATTERN] = counts.get(PATTERN, 0) + found
        return (clean, counts) if counts else (text, counts)


def _may_hold_card(text: str) -> bool:
    """False when `text` cannot hold a card (see `CARD_RUN_MAP`); non-ASCII text (Unicode
    separators) holds one when it holds a digit."""
    if text.isascii():
        return _CARD_RUN in text.encode().translate(CARD_RUN_MAP)
    return _ANY_DIGIT.search(text) is not None


def _replace_emails(text: str) -> tuple[str, int]:
    """`text` with every e-mail address replaced, and how many there were: each "@" is
    tried with the local part before it and the domain after it (the scan costs a few
    characters per "@", not a regular expression over the whole text)."""
    pieces: list[str] = []
    start = found = 0
    at = text.find("@")
    while at != -1:
        local = _LOCAL_PART.search(text, max(start, at - 64), at)
        domain = _DOMAIN.match(text, at + 1)
        if local is not None and domain is not None:
            pieces += [text[start : local.start()], EMAIL_MARK]
            start = domain.end()
            found += 1
        at = text.find("@", max(at + 1, start))
    if not found:
        return text, 0
    pieces.append(text[start:])
    return "".join(pieces), found


def add_counts(total: Counts, more: Counts) -> None:
    """Add `more` into `total`, kind by kind."""
    for kind, count in more.items():
        total[kind] = total.get(kind, 0) + count


class _CardReplacer:
    """`re.sub` callback: replaces the longest Luhn-valid card at the start of a digit run
    and counts the replacements."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, match: re.Match[str]) -> str:
        run = match.group()
        digits, ends = _card_ends(run)
        for count, end in ends:
            if luhn_valid(digits[:count]):
                self.count += 1
                return CARD_MARK + run[end:]
        return run


def _card_ends(run: str) -> tuple[str, list[tuple[int, int]]]:
    """The digits of `run`, and where a card may end in it as (digits before, index): the
    run's end, then before each separator, longest first (a card followed by more digits:
    "4111 1111 1111 1111 12")."""
    digits: list[str] = []
    boundaries = []
    for index, char in enumerate(run):
        if "0" <= char <= "9":
            digits.append(char)
        elif run[index - 1].isdigit():
            boundaries.append((len(digits), index))
    ends = [(len(digits), len(run)), *reversed(boundaries)]
    text = "".join(digits)
    return text, [(n, end) for n, end in ends if CARD_MIN_DIGITS <= n <= CARD_MAX_DIGITS]
