"""Personal data in text: one definition of what an e-mail address and a payment card look
like, shared by the collector (which scrubs every string it forwards and counts what it
withholds or drops) and the detectors (PG115 on a captured final answer).

A value is matched by what it says, not by how it is spelt: text is first brought to one
canonical form (`normalise`), undoing what can hide a value, then matched by rules that
do not depend on separators. The kinds found and the marks that replace them are
`schemas.personal_data`'s.

Normalisation:
- encodings are undone, over and over until nothing changes (at most 8 rounds, so
  `%252540` is `%2540` is `%40` is `@`): percent-encoding, HTML character references
  (named such as `&commat;` and `&nbsp;`, decimal, hexadecimal, with or without `;`),
  backslash escapes (`\\u0040`, surrogate pairs, `\\u{40}`, `\\x40`, a backslash before
  punctuation);
- NFKC (full-width and small forms such as `＠` and `﹫`, circled and superscript digits,
  compatibility spaces);
- invisible characters are removed: every format character (zero-width spaces and joiners,
  bidi marks, embeddings and isolates, the soft hyphen, tags) and every combining mark (the
  combining grapheme joiner, variation selectors, the keycap mark: `4️⃣` is `4`);
- every decimal digit becomes its ASCII digit, every full stop or middle dot of another
  script (the ideographic `。`, `·`) becomes `.`, a bracketed `at` or `dot` (`(at)`,
  `[dot]`) becomes `@` or `.`, and an address spelt out (`jane at example dot com`)
  becomes one.
Plain ASCII text without `%`, `&`, `\\`, a bracketed `at`/`dot` or a spelt-out ` dot ` is
matched as is.

Rules:
- e-mail: an `@` with a local part before it (up to 64 characters of the characters RFC
  5322 allows, or a quoted string) and a domain after it (two or more labels of letters,
  digits and `-` in any script, or an address literal such as `[192.0.2.1]`), spaces
  around the `@` and the domain's dots allowed; no top-level domain list;
- card: 13-19 digits that pass the Luhn check, in a chain of digits where any run of up to
  32 characters that are not letters or digits (spaces, `_`, `,`, `·`, dashes, ...)
  may stand between two digits; a card may start at the chain's first digit or after any
  separator, and end at its last digit or before any separator. Digits glued to a letter
  (`x4111...`, `...1111y`), and a card that is only part of its chain, count when they
  start with a major industry identifier of banking and finance (2-6), so most digit runs
  inside ids are left alone; a number value (an integer, or a float holding an integer)
  is a card when its 13-19 digits pass the Luhn check and start with 2-6 (timestamps and
  ids, which start with 1, are not);
- encoded token (`scrub` only, for text that is forwarded): a run of at least 8 base64,
  base64url or hexadecimal characters (and every piece of it between `/`, `+`, `-` and
  `_`) that decodes to UTF-8 text is scanned again, two levels deep; a token whose text
  holds personal data is replaced by the marks of what it holds;
- pattern: a match of a configured extra regular expression.

`PiiScanner.scrub(text)` returns the text with each finding replaced by its mark
(`[REDACTED:email]`, `[REDACTED:card]`, `[REDACTED]`) and the count per kind; when nothing
is found the text is returned unchanged (not normalised); with findings, the normalised
text is what is returned, marked. `PiiScanner.find(text)` counts without decoding
tokens: it reads content that is never forwarded (what the collector drops or withholds).
"""

from __future__ import annotations

import binascii
import html
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import cache
from itertools import accumulate
from typing import Final
from urllib.parse import unquote

from pathgrade.content.memo import BoundedMemo
from pathgrade.schemas.personal_data import (
    CARD,
    CARD_MARK,
    EMAIL,
    EMAIL_MARK,
    MARKS,
    PATTERN,
    PATTERN_MARK,
    Counts,
)

# --- normalisation --------------------------------------------------------------------------
TRIGGERS: Final = "@%&\\"
"""Characters that send ASCII text to the full reading: an at sign, and the openings of
percent-encoding, HTML references and backslash escapes."""
OBFUSCATION_OPENERS: Final = "([{<"
OBFUSCATION_WORDS: Final = ("at", "dot")
"""A bracketed word standing for "@" or "." (`(at)`, `[ dot ]`), opened by one of these."""
SPELT_DOT: Final = "dot"
"""The word an address spelt out has between spaces (`jane at example dot com`)."""
_MAX_DECODES = 8
_WORDS = "|".join(OBFUSCATION_WORDS)
_BRACKETED = re.compile(rf"[(\[{{<][^\S\n]*(?:{_WORDS})[^\S\n]*[)\]}}>]", re.I)
_OBFUSCATED = re.compile(rf"[^\S\n]*[(\[{{<][^\S\n]*({_WORDS})[^\S\n]*[)\]}}>][^\S\n]*", re.I)
_BACKSLASH = re.compile(
    r"\\u\{([0-9A-Fa-f]{1,6})\}|\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})|\\(?=[^\w\s])"
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SUPPLEMENTARY = re.compile("[\U00010000-\U0010ffff]")
_NON_ASCII_DIGIT = re.compile(r"(?![0-9])\d")
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Mn", "Me"})
# Full stops of other scripts (the ideographic one, its half-width and vertical forms, ...).
# Full stops and middle dots of other scripts (the ideographic full stop, its half-width and
# vertical forms, the middle dot, the katakana middle dot, the dot operator, ...).
_FULL_STOPS = re.compile(
    "[\u3002\uff61\ufe12\u06d4\u0701\u0702\u1362\u166e\u2e3c\ua4ff\ua60e\ua6f3"
    "\u00b7\u0387\u2027\u2219\u22c5\u2e31\u30fb\uff65]"
)

# --- matching -------------------------------------------------------------------------------
# An address is found from its "@": the local part ends there, the domain starts after it.
_LOCAL_PART = re.compile(r"(?:\"[^\"\n]{1,64}\"|[\w.!#$%&'*+/=?^`{|}~\-]{1,64})[^\S\n]*\Z")
_DOMAIN = re.compile(
    r"[^\S\n]*(?:\[[^\]\s]{1,64}\]|[\w\-]{1,63}(?:[^\S\n]*\.[^\S\n]*[\w\-]{1,63}){1,8})"
)
# An address spelt out: `jane at example dot com` (the whole shape, so `look at this` is not).
_SPELT = re.compile(
    r"([\w.+\-]{1,64})[^\S\n]+at[^\S\n]+([\w\-]{1,63}(?:[^\S\n]+dot[^\S\n]+[\w\-]{1,63}){1,8})",
    re.I,
)
_SPELT_DOT = re.compile(rf"[^\S\n]+{SPELT_DOT}[^\S\n]+", re.I)
_SPELT_TRIGGER = re.compile(rf"\s{SPELT_DOT}\s", re.I)
CARD_MIN_DIGITS: Final = 13
CARD_MAX_DIGITS: Final = 19
MAX_SEPARATOR_RUN: Final = 32
"""The longest run of non-alphanumeric characters that may stand between two card digits."""
# A chain of digits with separator runs between them (the classes are disjoint, so the
# expression never backtracks more than one separator run).
_DIGIT_CHAIN = re.compile(rf"[0-9](?:[\W_]{{0,{MAX_SEPARATOR_RUN}}}[0-9])*")
_DIGIT_RUN = re.compile(rf"[0-9]{{{CARD_MIN_DIGITS},}}")
PAYMENT_INDUSTRIES: Final = frozenset("23456")
"""First digits of cards (major industry identifiers of banking and finance)."""
_PAYMENT_DIGITS = frozenset(range(2, 7))
_SAME = tuple(range(10))
_DOUBLED = tuple((2 * d) // 10 + (2 * d) % 10 for d in range(10))
_LUHN_DOUBLED = {str(d): (2 * d) // 10 + (2 * d) % 10 for d in range(10)}
# The pre-check of ASCII text: a card is a run of digits and separators holding at least
# 13 digits, so the text mapped byte by byte (digit -> "0", other non-letter -> "1",
# anything else -> "x") holds a run of "0" and "1" with 13 "0"s (C-speed searches instead
# of the chain expression).
CARD_RUN_MAP = bytes(
    ord("0") if chr(byte).isdigit() and byte < 0x80
    else ord("1") if not chr(byte).isalpha() and byte < 0x80
    else ord("x")
    for byte in range(256)
)  # fmt: skip
"""Byte -> "0" for an ASCII digit, "1" for another byte a card's run may hold (ASCII that
is not a letter), "x" for any other."""
_CARD_RUNS = re.compile(rb"[01]{13,}")

# --- encoded tokens -------------------------------------------------------------------------
ENCODED_MIN_CHARS: Final = 8
"""The shortest run of base64 or hexadecimal characters that is decoded and scanned."""
ENCODED_HEX_CHARS: Final = ENCODED_MIN_CHARS + 4
"""Hexadecimal digits in a row that make a run a token to decode (6 bytes: `a@b.co`)."""
_BASE64 = r"A-Za-z0-9+/_\-"
ENCODED_MAP: Final = bytes(
    ord("0") if re.fullmatch(f"[{_BASE64}]", chr(byte)) else ord("x") for byte in range(256)
)
"""Byte -> "0" for a base64 or base64url character, else "x"."""
# A run of base64/base64url characters (the whole run: no base64 character before it) that
# may encode text: an upper-case letter with a lower-case one or a digit (base64 of text of
# 6 bytes or more has them: of letters, both cases; of digits, upper case and digits), or
# 12 hexadecimal digits in a row. Each lookahead scans the run once (lazily), so the search
# stays linear on hostile runs.
_ENCODED = re.compile(
    rf"(?<![{_BASE64}])(?:(?=[{_BASE64}]*?[A-Z])(?=[{_BASE64}]*?[a-z0-9])"
    rf"|(?=[{_BASE64}]*?[0-9A-Fa-f]{{{ENCODED_HEX_CHARS}}}))[{_BASE64}]{{{ENCODED_MIN_CHARS},}}={{0,2}}"
)
_TOKEN_PIECES = re.compile(r"[/+_\-]")
_BASE64_TEXT = re.compile(r"[A-Z].*?[a-z0-9]|[a-z0-9].*?[A-Z]")  # upper case, and more
_HEX = re.compile(rf"[0-9A-Fa-f]{{{ENCODED_HEX_CHARS},}}")
_URL_SAFE = str.maketrans("-_", "+/")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MAX_TOKEN_DEPTH = 2

_MAX_REMEMBERED = 16_384
_MAX_REMEMBERED_CHARS = 256


def luhn_valid(digits: str) -> bool:
    """True when `digits` (ASCII digits only, at least two) passes the Luhn checksum."""
    if len(digits) < 2 or not digits.isascii() or not digits.isdigit():
        return False
    total = sum(map(int, digits[-1::-2])) + sum(map(_LUHN_DOUBLED.__getitem__, digits[-2::-2]))
    return total % 10 == 0


def needs_decoding(text: str) -> bool:
    """False when `normalise` returns `text` as is: plain ASCII without `%`, `&`, `\\`, a
    bracketed `at`/`dot` or a spelt-out ` dot `."""
    return (
        not text.isascii()
        or "%" in text
        or "&" in text
        or "\\" in text
        or _BRACKETED.search(text) is not None
        or _SPELT_TRIGGER.search(text) is not None
    )


def normalise(text: str) -> str:
    """`text` as it is matched (see the module doc); plain ASCII text (`needs_decoding`
    False) is returned as is."""
    if not needs_decoding(text):
        return text
    text = _decoded(text)
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text)
        text = _invisible().sub("", text)
        if _SUPPLEMENTARY.search(text):
            text = _SUPPLEMENTARY.sub(_supplementary, text)
        text = _NON_ASCII_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group(), 0)), text)
        text = _FULL_STOPS.sub(".", text)
    text = _OBFUSCATED.sub(lambda m: "@" if m.group(1).lower() == "at" else ".", text)
    return _SPELT.sub(lambda m: m.group(1) + "@" + _SPELT_DOT.sub(".", m.group(2)), text)


def _decoded(text: str) -> str:
    """`text` with percent-encoding, HTML references and backslash escapes undone, round
    after round until nothing changes (bounded)."""
    for _ in range(_MAX_DECODES):
        before = text
        if "%" in text:
            text = unquote(text)
        if "&" in text:
            text = html.unescape(text)
        if "\\" in text:
            text = _BACKSLASH.sub(_unescaped, text)
            if _SURROGATE.search(text):  # pairs from \ud83d\ude00, lone ones replaced
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        if text == before:
            break
    return text


def _unescaped(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2) or match.group(3)
    if code is None:
        return ""  # a backslash before punctuation
    point = int(code, 16)
    return chr(point) if point <= 0x10FFFF else match.group()


@cache
def _invisible() -> re.Pattern[str]:
    """Every format character and combining mark of the Basic Multilingual Plane (built on
    first use: ~20 ms; characters past it are checked one by one, `_supplementary`)."""
    ranges: list[tuple[int, int]] = []
    for point in range(0x80, 0x10000):
        if unicodedata.category(chr(point)) in _INVISIBLE_CATEGORIES:
            if ranges and ranges[-1][1] == point - 1:
                ranges[-1] = (ranges[-1][0], point)
            else:
                ranges.append((point, point))
    # Hangul fillers and the braille blank render as nothing though they are letters.
    fillers = "\u115f\u1160\u3164\uffa0\u2800"
    spans = "".join(re.escape(chr(a)) + "-" + re.escape(chr(b)) for a, b in ranges)
    return re.compile(f"[{spans}{fillers}]")


def _supplementary(match: re.Match[str]) -> str:
    char = match.group()
    if unicodedata.category(char) in _INVISIBLE_CATEGORIES:
        return ""
    return str(unicodedata.decimal(char)) if unicodedata.decimal(char, None) is not None else char


def card_number(value: int | float) -> bool:
    """True when a number attribute holds a plausible payment card (see the module doc)."""
    if isinstance(value, float):
        if not value.is_integer():
            return False
        value = int(value)
    digits = str(abs(value))
    return (
        CARD_MIN_DIGITS <= len(digits) <= CARD_MAX_DIGITS
        and digits[0] in PAYMENT_INDUSTRIES
        and luhn_valid(digits)
    )


class PiiScanner:
    """Finds and replaces e-mail addresses, card numbers and the configured patterns; the
    outcome for short texts (names, ids, models repeat) is remembered, bounded."""

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        self.extra_patterns = [re.compile(pattern) for pattern in extra_patterns]
        self._scrubbed: BoundedMemo[str, tuple[str, Counts]] = BoundedMemo(_MAX_REMEMBERED)
        self._found: BoundedMemo[str, Counts] = BoundedMemo(_MAX_REMEMBERED)

    def scrub(self, text: str) -> tuple[str, Counts]:
        """`text` as it may be forwarded, with every finding (encoded tokens included)
        replaced by its mark, and the count per kind; the original `text` and {} when
        nothing was found."""
        if len(text) > _MAX_REMEMBERED_CHARS:
            return self._scrub(text, 0)
        done = self._scrubbed.get(text)
        if done is None:
            done = self._scrubbed.put(text, self._scrub(text, 0))
        return done

    def clean(self, text: str) -> str:
        """`text` scrubbed."""
        return self.scrub(text)[0]

    def find(self, text: str) -> Counts:
        """The count per kind of personal data in `text`, encoded tokens left undecoded
        (for content that is not forwarded)."""
        if len(text) > _MAX_REMEMBERED_CHARS:
            return self._scrub(text, _MAX_TOKEN_DEPTH)[1]
        found = self._found.get(text)
        if found is None:
            found = self._found.put(text, self._scrub(text, _MAX_TOKEN_DEPTH)[1])
        return found

    def _scrub(self, text: str, depth: int) -> tuple[str, Counts]:
        """Scrub `text`; encoded tokens are decoded while `depth` is below the bound."""
        clean = normalise(text)
        counts: Counts = {}
        if "@" in clean:
            clean, found = _replace_emails(clean)
            if found:
                counts[EMAIL] = found
        if len(clean) >= CARD_MIN_DIGITS and _may_hold_card(clean):
            clean, found = _replace_cards(clean)
            if found:
                counts[CARD] = found
        if depth < _MAX_TOKEN_DEPTH and _ENCODED.search(clean):
            clean = _ENCODED.sub(lambda m: self._token(m.group(), depth, counts), clean)
        for pattern in self.extra_patterns:
            clean, found = pattern.subn(PATTERN_MARK, clean)
            if found:
                counts[PATTERN] = counts.get(PATTERN, 0) + found
        return (clean, counts) if counts else (text, counts)

    def _token(self, token: str, depth: int, counts: Counts) -> str:
        """A run of base64/hex characters, or the marks of what its decoded text holds."""
        pieces = _TOKEN_PIECES.split(token) if _TOKEN_PIECES.search(token) else []
        for piece in (token, *pieces):
            for decoded in _decodings(piece):
                found = self._scrub(decoded, depth + 1)[1]
                if found:
                    add_counts(counts, found)
                    return "".join(MARKS[kind] * count for kind, count in found.items())
        return token


def _decodings(piece: str) -> list[str]:
    """The printable texts `piece` decodes to that may hold personal data: as hexadecimal
    (an even number of hex digits), or as base64 or base64url (an upper-case letter, and a
    lower-case one or a digit), read from each of its first four characters (a token glued
    to a prefix)."""
    raws = []
    body = piece.rstrip("=")
    if len(body) % 2 == 0 and _HEX.fullmatch(body):
        raws.append(bytes.fromhex(body))
    elif _BASE64_TEXT.search(body):
        standard = body.translate(_URL_SAFE)
        for skip in range(4):
            part = standard[skip:]
            if len(part) >= ENCODED_MIN_CHARS and len(part) % 4 != 1:
                raws.append(binascii.a2b_base64(part + "=" * (-len(part) % 4)))
    texts = []
    for raw in raws:
        text = raw.decode("utf-8", "replace")
        if "\ufffd" in text or _CONTROL.search(text):
            continue
        if (
            not text.isascii()
            or needs_decoding(text)
            or "@" in text
            or _digits(text) >= CARD_MIN_DIGITS
            or _ENCODED.search(text)  # a token in a token: read at the next depth
        ):
            texts.append(text)
    return texts


def _digits(text: str) -> int:
    """How many ASCII digits `text` holds."""
    return sum(map(text.count, "0123456789"))


def _may_hold_card(text: str) -> bool:
    """False when `text` cannot hold a card: (ASCII text) no run of characters a card may
    be written with that holds 13 digits (see `CARD_RUN_MAP`); else fewer than 13 digits."""
    if not text.isascii():
        return _digits(text) >= CARD_MIN_DIGITS
    runs = _CARD_RUNS.findall(text.encode().translate(CARD_RUN_MAP))
    return any(run.count(b"0") >= CARD_MIN_DIGITS for run in runs)


def _replace_emails(text: str) -> tuple[str, int]:
    """`text` with every e-mail address replaced, and how many there were: each "@" is
    tried with the local part before it and the domain after it (the scan costs a few
    characters per "@", not a regular expression over the whole text)."""
    pieces: list[str] = []
    start = found = 0
    at = text.find("@")
    while at != -1:
        local = _LOCAL_PART.search(text, max(start, at - 72), at)
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


def _replace_cards(text: str) -> tuple[str, int]:
    """`text` with every card replaced by its mark, and how many there were."""
    pieces: list[str] = []
    start = found = 0
    for chain in _DIGIT_CHAIN.finditer(text):
        if len(chain.group()) < CARD_MIN_DIGITS:
            continue
        first, last = chain.span()
        glued = (first > 0 and text[first - 1].isalnum()) or (
            last < len(text) and text[last].isalnum()
        )
        for card_start, card_end in _cards_in(chain.group(), glued):
            pieces += [text[start : first + card_start], CARD_MARK]
            start = first + card_end
            found += 1
    if not found:
        return text, 0
    pieces.append(text[start:])
    return "".join(pieces), found


def _cards_in(chain: str, glued: bool) -> list[tuple[int, int]]:
    """Where cards are in a chain of digits and separators, as (start, end) in `chain`:
    leftmost first, each the longest that fits (see the module doc)."""
    positions = [i for i, char in enumerate(chain) if "0" <= char <= "9"]
    if len(positions) < CARD_MIN_DIGITS:
        return []
    digits = [ord(chain[i]) - 48 for i in positions]
    luhn = _LuhnSums(digits)
    starts = [0] + [n for n in range(1, len(positions)) if positions[n] != positions[n - 1] + 1]
    ends = [*starts[1:], len(positions)]
    cards = []
    taken = 0
    for begin in starts:
        if begin < taken or (digits[begin] not in _PAYMENT_DIGITS and begin > 0):
            continue  # a card past the chain's first digit starts with 2-6
        # The ends 13-19 digits past `begin`, longest first (at most 7: one per group).
        low = bisect_left(ends, begin + CARD_MIN_DIGITS)
        high = bisect_right(ends, begin + CARD_MAX_DIGITS)
        for end in reversed(ends[low:high]):
            whole = begin == 0 and end == len(positions) and not glued
            if (whole or digits[begin] in _PAYMENT_DIGITS) and luhn.valid(begin, end):
                cards.append((positions[begin], positions[end - 1] + 1))
                taken = end
                break
    return cards


class _LuhnSums:
    """The Luhn check of any run of a digit list in constant time, from prefix sums of its
    digits and doubled digits at even and odd places."""

    __slots__ = ("_doubled", "_plain")

    def __init__(self, digits: list[int]) -> None:
        self._plain = [_prefix_sums(digits, parity, _SAME) for parity in (0, 1)]
        self._doubled = [_prefix_sums(digits, parity, _DOUBLED) for parity in (0, 1)]

    def valid(self, begin: int, end: int) -> bool:
        """True when digits[begin:end] pass the Luhn check (the last digit is not doubled,
        the one before it is, and so on)."""
        last = (end - 1) % 2
        plain, doubled = self._plain[last], self._doubled[1 - last]
        return (plain[end] - plain[begin] + doubled[end] - doubled[begin]) % 10 == 0


def _prefix_sums(digits: list[int], parity: int, weight: tuple[int, ...]) -> list[int]:
    """Running sums of `weight[digit]` over the digits at places of `parity` (0 elsewhere)."""
    return list(
        accumulate((weight[d] if i % 2 == parity else 0 for i, d in enumerate(digits)), initial=0)
    )


def id_holds_card(hex_text: str) -> bool:
    """True when the hex of a trace or span id is a card written into an id: 13-19 of its
    digits in a row start with 2-6 and pass the Luhn check, and every other character is
    one and the same padding (`0000000000000000` + a card, a card + `ffff...`). A random
    16-byte trace id practically never is one (none in a million drawn); a random 8-byte
    span id is about once in 8,000 (its 16 hex digits all decimal and Luhn-valid: no rule
    tells that from a card written into it), and is then stored under its fingerprint. A
    card hidden among random hex letters is not recognised."""
    for run in _DIGIT_RUN.finditer(hex_text):
        digits = [ord(c) - 48 for c in run.group()]
        luhn = _LuhnSums(digits)
        for begin, first in enumerate(digits):
            if first not in _PAYMENT_DIGITS:
                continue
            for end in range(
                begin + CARD_MIN_DIGITS, min(len(digits), begin + CARD_MAX_DIGITS) + 1
            ):
                start, stop = run.start() + begin, run.start() + end
                padding = set(hex_text[:start] + hex_text[stop:])
                if len(padding) <= 1 and luhn.valid(begin, end):
                    return True
    return False


def add_counts(total: Counts, more: Counts) -> None:
    """Add `more` into `total`, kind by kind."""
    for kind, count in more.items():
        total[kind] = total.get(kind, 0) + count
