"""content.pii: e-mail and card detection after normalisation, as properties over variants
of how a value can be written (separators, encodings, digit forms, domains), and the
collector scrubbing every string it forwards, whatever its field or type."""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.content import pii
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.pii import PiiScanner, card_number, luhn_valid, normalise
from pathgrade.content.withheld import read_withheld
from pathgrade.schemas.facts import PII_DROPPED, PII_SCRUBBED
from pathgrade.schemas.personal_data import CARD_MARK, EMAIL_MARK

CARDS = ("4111111111111111", "5555555555554444", "378282246310005", "6011111111111117",
         "3530111333300000", "4012888888881881", "2223003122003222")  # fmt: skip
NOT_CARDS = ("4111111111111112", "1234567890123", "411111111111")
SEPARATORS = (" ", "-", ".", "/", "  ", "\u00a0", "\u3000", "\u2009", "\u200b", "\u2013", " - ")
FULL_WIDTH = {ord(d): chr(0xFF10 + int(d)) for d in "0123456789"}
ARABIC_INDIC = {ord(d): chr(0x0660 + int(d)) for d in "0123456789"}
SCANNER = PiiScanner()


def grouped(card: str, separator: str, size: int) -> str:
    return separator.join(card[i : i + size] for i in range(0, len(card), size))


@st.composite
def written_cards(draw: st.DrawFn) -> str:
    """A test card as someone might write it: grouped with odd separators, other digit
    forms, percent-encoded, inside other text."""
    card = draw(st.sampled_from(CARDS))
    text = grouped(card, draw(st.sampled_from(SEPARATORS)), draw(st.sampled_from((4, 3, 5))))
    digits = draw(st.sampled_from((None, FULL_WIDTH, ARABIC_INDIC)))
    if digits:
        text = text.translate(digits)
    if draw(st.booleans()):
        text = urllib.parse.quote(text)
        if draw(st.booleans()):
            text = urllib.parse.quote(text)  # encoded twice: %2520
    before = draw(st.sampled_from(("", "card ", "paid with: ", "n°")))
    after = draw(st.sampled_from(("", ".", " thanks", ", exp 12/29")))
    return before + text + after


@st.composite
def written_emails(draw: st.DrawFn) -> str:
    """An e-mail address with ASCII, Unicode or punycode domains, maybe encoded."""
    local = draw(st.sampled_from(("dana", "dana.kim+x", "Ömer", "用户", "a_b-c")))
    domain = draw(
        st.sampled_from(("example.com", "bücher.de", "例え.jp", "xn--bcher-kva.de", "mail.co.uk"))
    )
    at = draw(st.sampled_from(("@", "＠")))
    text = f"{local}{at}{domain}"
    if draw(st.booleans()):
        text = urllib.parse.quote(text)
    return draw(st.sampled_from(("", "mail me: ", "<"))) + text + draw(st.sampled_from(("", ">")))


@settings(max_examples=300, deadline=None)
@given(written_cards())
def test_every_written_form_of_a_card_is_found_and_replaced(text: str) -> None:
    clean, counts = SCANNER.scrub(text)
    assert counts == {"card": 1}, (text, clean)
    assert CARD_MARK in clean
    assert not any(c in normalise(clean).replace(" ", "") for c in CARDS), clean


@settings(max_examples=200, deadline=None)
@given(written_emails())
def test_every_written_form_of_an_email_is_found_and_replaced(text: str) -> None:
    clean, counts = SCANNER.scrub(text)
    assert counts == {"email": 1}, (text, clean)
    assert "@" not in clean and EMAIL_MARK in clean


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Nd",)), max_size=80))
def test_text_without_digits_or_at_signs_is_returned_unchanged(text: str) -> None:
    if any(c in text for c in "@＠﹫%&"):  # an at sign, or what may encode one
        return
    assert SCANNER.scrub(text) == (text, {})


def test_non_cards_stay_and_luhn_is_the_shared_check() -> None:
    for number in NOT_CARDS:
        assert SCANNER.scrub(f"order {number}") == (f"order {number}", {})
    assert all(luhn_valid(card) for card in CARDS)


def test_number_attributes_are_cards_only_with_a_payment_industry_prefix() -> None:
    assert card_number(4111111111111111) and card_number(-5555555555554444)
    assert card_number(4111111111111111.0)
    assert not card_number(1735689600000000000)  # a timestamp in ns (Luhn-valid or not)
    assert not card_number(1700000000000)  # ms, starts with 1
    assert not card_number(4111111111111112) and not card_number(4.5)


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _string(text: str) -> AnyValue:
    return AnyValue(string_value=text)


def hostile_request() -> ExportTraceServiceRequest:
    """Personal data in every string field a span can carry, and in typed values."""
    email, card = "dana@bücher.de", "4111\u00a01111\u00a01111\u00a01111"
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add(schema_url=f"https://x.io/{email}")
    resource_spans.resource.attributes.append(_kv("owner", _string(email)))
    scope_spans = resource_spans.scope_spans.add(schema_url=f"https://y.io/?c={card}")
    scope_spans.scope.name, scope_spans.scope.version = f"lib for {email}", card
    span = scope_spans.spans.add(
        trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name=f"lookup {email}",
        trace_state=f"vendor={urllib.parse.quote(email)}",
    )  # fmt: skip
    span.status.message = f"card {card} declined"
    span.attributes.extend(
        [
            _kv("card.number", AnyValue(int_value=4111111111111111)),
            _kv("pathgrade.card.float", AnyValue(double_value=5555555555554444.0)),
            _kv("pathgrade.raw", AnyValue(bytes_value=f"to {email}".encode())),
            _kv("url", _string("mailto:dana%40example.com?card=4111%201111%201111%201111")),
            _kv("pathgrade.timestamp_ns", AnyValue(int_value=1735689600000000000)),
        ]
    )
    span.events.add(name=f"mail to {email}").attributes.append(_kv("n", _string(card)))
    link = span.links.add(trace_id=b"\x03" * 16, span_id=b"\x04" * 8, trace_state=f"a={card}")
    link.attributes.append(_kv("who", _string(email)))
    return request


def _strings(value: Any) -> list[str]:
    """Every string and bytes value reachable in a message, as text."""
    found = []
    for field, item in value.ListFields():
        if field.type == field.TYPE_MESSAGE:
            items = item if isinstance(item, Sequence) else [item]
            for sub in items:
                found += _strings(sub)
        elif isinstance(item, str):
            found.append(item)
        elif isinstance(item, bytes) and field.name == "bytes_value":
            found.append(item.decode())
    return found


def test_the_collector_scrubs_every_string_it_forwards_whatever_its_field_or_type() -> None:
    request = hostile_request()
    Redactor(RedactionConfig(), FactMaker(FactSecret(b"k" * 32), PiiScanner())).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    texts = _strings(request)
    assert not [t for t in texts if "@" in normalise(t) or "1111" in normalise(t)], texts
    values = {kv.key: kv.value for kv in span.attributes}
    assert read_withheld(values["card.number"].string_value).kinds == ("card",)  # not allowed
    assert read_withheld(values["url"].string_value).kinds == ("card", "email")
    assert values["pathgrade.card.float"].string_value == CARD_MARK  # allowed: scrubbed
    assert values["pathgrade.timestamp_ns"].int_value == 1735689600000000000  # not a card
    scrubbed = values[PII_SCRUBBED].string_value
    fields = ("name", "status.message", "trace_state", "link.trace_state", "pathgrade.raw",
              "url", "card.number", "resource:owner", "scope.name", "scope.version",
              "schema_url", "scope.schema_url", "event.name",
              "event:mail to [REDACTED:email]:n")  # fmt: skip
    for field in fields:
        assert f'"{field}"' in scrubbed, (field, scrubbed)
    assert PII_DROPPED not in values


def test_without_facts_the_collector_still_scrubs_but_records_nothing() -> None:
    request = hostile_request()
    stats = Redactor(RedactionConfig()).redact(request)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    assert stats.scrubbed_values >= 14 and stats.spans_with_facts == 0
    assert not [kv for kv in span.attributes if kv.key.startswith("pathgrade.facts.")]
    assert not [t for t in _strings(request) if "@" in normalise(t)]


def test_hostile_text_is_scanned_in_linear_time_per_character() -> None:
    """200,000 characters of near-misses: every digit a candidate start, every letter a
    possible local part; the scan finishes and finds nothing."""
    hostile = "a" * 100_000 + "@" + "1 " * 50_000 + "%" * 1000
    assert SCANNER.scrub(hostile) == (hostile, {})


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from('0123456789 .-/+\t\u2012x:a"@%é'), min_size=0, max_size=60)
    | st.builds(
        lambda run, sep: sep.join(run),
        st.lists(st.text("0123456789", max_size=5), max_size=8),
        st.sampled_from(("", " ", " - ", "\t", ".", "\u2012", "x", "  /")),
    )
)
def test_the_card_pre_check_never_skips_text_the_card_expression_matches(text: str) -> None:
    """`_may_hold_card` skips the card search only where it could not find one."""
    normal = normalise(text)
    if pii._replace_cards(normal)[1]:
        assert pii._may_hold_card(normal), normal


def test_the_card_pre_check_passes_cards_and_skips_runs_too_short_for_one() -> None:
    assert pii._may_hold_card('{"card": "4111 1111 - 1111 1111"}')
    assert pii._may_hold_card("4111\u20121111\u20121111\u20121111")  # Unicode dash
    assert not pii._may_hold_card('{"id": "call_409a8a78909ff4976a8a43ef", "n": 1234567}')
    assert not pii._may_hold_card("-" * 40 + "12345")  # a long run, too few digits


def test_digit_runs_glued_to_letters_are_cards_when_they_start_like_one() -> None:
    """A letter glued before or after a card does not hide it; a digit run glued to
    letters (inside a hex id) counts as a card only when it starts as cards do (2-6), so
    most runs inside ids are left alone, while the same digits standing alone are a card
    whatever they start with."""
    card, id_like = "2508042088708", "1234567890128"
    assert luhn_valid(card) and luhn_valid(id_like)
    for glued in (f"x{card}", f"{card}y", f"ab{card}cd", f"trace-5f14ca83ce{card}e475a61f5"):
        assert SCANNER.scrub(glued)[1] == {"card": 1}, glued
    for glued in (f"x{id_like}", f"{id_like}y", f"trace-5f14ca83ce{id_like}e475a61f5"):
        assert SCANNER.scrub(glued) == (glued, {}), glued
    for alone in (card, id_like, f"id-{id_like}", f"({id_like})", f"_{id_like}_", f"n°{card}"):
        assert SCANNER.scrub(alone)[1] == {"card": 1}, alone


ENCODED_EMAIL = "dana.kim@example.org"
ENCODED_CARD = "4111111111111111"


@pytest.mark.parametrize(
    "text",
    [
        ENCODED_EMAIL.replace("@", "&#64;"),
        ENCODED_EMAIL.replace("@", "&commat;"),
        ENCODED_EMAIL.replace("@", "&#x40;"),
        ENCODED_EMAIL.replace("@", "&#64"),
        ENCODED_EMAIL.replace("@", "\\u0040"),
        ENCODED_EMAIL.replace("@", "\\x40"),
        urllib.parse.quote(urllib.parse.quote(urllib.parse.quote(ENCODED_EMAIL, safe=""))),
        ENCODED_EMAIL.replace("@", "\u2066@\u2069"),
        ENCODED_EMAIL.replace("kim", "k\u034fim").replace("org", "o\ufe0frg"),
        ENCODED_EMAIL.replace(".org", "\u3002org"),
        ENCODED_EMAIL.replace(".org", "\uff61org"),
        "dana@[192.0.2.1]",
        '"dana kim"@example.org',
        base64.b64encode(ENCODED_EMAIL.encode()).decode(),
        base64.urlsafe_b64encode(ENCODED_EMAIL.encode()).decode().rstrip("="),
        "id:" + base64.b64encode(ENCODED_EMAIL.encode()).decode(),
        "vendor=" + base64.b64encode(ENCODED_EMAIL.encode()).decode(),
        "GET /search?q=" + ENCODED_EMAIL.encode().hex(),
        ENCODED_EMAIL.encode().hex(),
        "dana.kim (at) example (dot) org",
        "dana.kim at example dot org",
        "Dana.Kim AT Example DOT org",
        "dana.kim@example . org",
        "dana.kim@example\u00b7org",
        "dana.kim@example\u30fborg",
        "dana.kim @ example.org",
        ENCODED_EMAIL.replace("@", "\ufe6b"),
        urllib.parse.quote(ENCODED_EMAIL.replace("@", "&#64;")),
        "4111_1111_1111_1111",
        "4111,1111,1111,1111",
        "4111\u00b71111\u00b71111\u00b71111",
        "4111    1111    1111    1111",
        "4111" + " " * 30 + "1111 1111 1111",
        f"x{ENCODED_CARD}",
        f"{ENCODED_CARD}x",
        "".join(d + "\ufe0f\u20e3" for d in ENCODED_CARD),
        "4111&nbsp;1111&nbsp;1111&nbsp;1111",
        "4111&#32;1111&#32;1111&#32;1111",
        base64.b64encode(ENCODED_CARD.encode()).decode(),
        base64.b64encode(b"4290098694599171").decode(),  # upper case and digits only
        ENCODED_CARD.encode().hex(),
        "\\u0034111111111111111",
        "4111\u200b1111\u200b1111\u200b1111",
    ],
)
def test_values_in_new_clothes_are_found(text: str) -> None:
    """Every encoding class of issue 38 (and more): each spelling is undone before the
    rules match, and what scrubbing forwards holds neither the address nor the digits."""
    clean, counts = SCANNER.scrub(text)
    assert sum(counts.values()) == 1, (text, clean)
    assert "dana" not in clean and "4111" not in clean.replace(" ", ""), clean


def test_words_that_only_look_like_a_spelt_address_stay() -> None:
    for text in ("look at this", "meet at noon dot", "at the dot com bubble", "x at y"):
        assert SCANNER.scrub(text) == (text, {}), text


def test_content_counts_leave_encoded_tokens_undecoded() -> None:
    """`find` reads content that is never forwarded: tokens are not decoded there (the
    cost of decoding is paid for forwarded text only)."""
    token = base64.b64encode(ENCODED_EMAIL.encode()).decode()
    assert SCANNER.find(token) == {} and SCANNER.scrub(token)[1] == {"email": 1}
    assert SCANNER.find(ENCODED_EMAIL.replace("@", "&#64;")) == {"email": 1}


def test_a_card_written_into_an_id_is_found_and_random_ids_are_not() -> None:
    card = "5555555555554444"
    for id_hex in ("0" * 16 + card, card + "f" * 16, "4111111111111111", "00" + card + "0" * 14):
        assert pii.id_holds_card(id_hex), id_hex
    assert not pii.id_holds_card("5f14ca83ce1234567890128e475a61f5")  # Luhn, but starts with 1
    assert not pii.id_holds_card("ab" + card + "0" * 14)  # random-looking: not an id of a card
    randoms = [bytes(range(i, i + 16)).hex() for i in range(200)]
    assert not any(pii.id_holds_card(r) for r in randoms)
