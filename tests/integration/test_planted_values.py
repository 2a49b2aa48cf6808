"""Personal data in new clothes (issue 38), planted on the real embedded stack on default
settings: e-mail addresses and card numbers, each written in one encoding class (HTML
references, JSON and backslash escapes, percent-encoding up to three times, invisible and
bidi characters, other scripts' full stops and digits, IP literals, quoted local parts,
base64, base64url, hexadecimal, bracketed `at`, separators of every sort, glued letters,
keycaps, values split over two attributes...), in every field the collector forwards
(span, event, link, resource and scope attributes and keys, names, ids, status, trace
state, schema URLs, query strings, content that facts read), through raw OTLP protobuf and
raw OTLP/JSON. Then everything the stack keeps or shows is read as an attacker would: the
raw `pathgrade.spans` topic, every column of every table of the store, and the browser
UI's trace list, trace pages and conversation pages, each decoded (the same decodings,
written independently of `content.pii`) and searched for each planted value's canonical
form (the address, the card's digits). The test prints survivors / planted and expects 0.

Each planted value is first found in the request that carries it with the same search,
so every encoding here is one the search undoes: a survivor cannot hide behind a spelling
the search does not read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import html
import json
import re
import time
import unicodedata
import urllib.error
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, TracesData
from pathgrade.content.pii import luhn_valid
from pathgrade.schemas.topics import SPANS_TOPIC

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.test_ingest import post
from tests.integration.test_up_alerts import fetch
from tests.support.topics import read_topic

pytestmark = pytest.mark.integration

NOW_NS = time.time_ns()  # the trace index keeps 90 days: spans of now
CONTENT_TYPES = {"protobuf": "application/x-protobuf", "json": "application/json"}


def q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


EMAIL_CLOTHES: dict[str, Callable[[str], str]] = {
    "plain": lambda e: e,
    "upper case": str.upper,
    "&#64;": lambda e: e.replace("@", "&#64;"),
    "&commat;": lambda e: e.replace("@", "&commat;"),
    "&#x40;": lambda e: e.replace("@", "&#x40;"),
    "&#0064 no semicolon": lambda e: e.replace("@", "&#0064"),
    "JSON \\u0040": lambda e: e.replace("@", "\\u0040"),
    "\\x40": lambda e: e.replace("@", "\\x40"),
    "percent x1": q,
    "percent x2": lambda e: q(q(e)),
    "percent x3": lambda e: q(q(q(e))),
    "bidi isolates": lambda e: e.replace("@", "\u2066@\u2069"),
    "bidi marks in the local part": lambda e: "\u200e" + e[:3] + "\u202e" + e[3:],
    "zero-width space": lambda e: e[:2] + "\u200b" + e[2:].replace(".", "\u200b."),
    "combining grapheme joiner": lambda e: e.replace("@", "\u034f@\u034f"),
    "soft hyphen": lambda e: e[:3] + "\u00ad" + e[3:],
    "variation selector": lambda e: e.replace("@", "@\ufe0f"),
    "tag characters": lambda e: e.replace("@", "\U000e0041@"),
    "ideographic full stop": lambda e: e.replace(".", "\u3002"),
    "half-width ideographic stop": lambda e: e.replace(".", "\uff61"),
    "full-width at and stop": lambda e: e.replace("@", "\uff20").replace(".", "\uff0e"),
    "small at": lambda e: e.replace("@", "\ufe6b"),
    "mathematical letters": lambda e: "".join(
        chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c for c in e
    ),
    "(at) (dot)": lambda e: e.replace("@", " (at) ").replace(".", "(dot)"),
    "[at] [dot]": lambda e: e.replace("@", "[at]").replace(".", " [ dot ] "),
    "spaces around @": lambda e: e.replace("@", " @ "),
    "spaces around the domain's dots": lambda e: e.replace(".example.", " . example . "),
    "spelt out": lambda e: e.replace("@", " at ").replace(".", " dot "),
    "middle dots in the domain": lambda e: e.replace(".example.", "\u00b7example\u00b7"),
    "katakana middle dots": lambda e: e.replace(".", "\u30fb"),
    "base64": b64,
    "base64url, no padding": lambda e: base64.urlsafe_b64encode(e.encode()).decode().rstrip("="),
    "base64 after a prefix": lambda e: "id=" + b64(e),
    "hex": lambda e: e.encode().hex(),
    "base64 of percent-encoding": lambda e: b64(q(e)),
    "mailto URL": lambda e: "mailto:" + e.replace("@", "%40") + "?subject=hi",
    "HTML in percent": lambda e: q(e.replace("@", "&#64;")),
    "JSON in JSON": lambda e: json.dumps(json.dumps({"to": e.replace("@", "\\u0040")})),
}
"""E-mail encodings: the address's spelling; IP literals and quoted local parts are
addresses of their own (`EMAIL_FORMS`)."""

CARD_CLOTHES: dict[str, Callable[[str], str]] = {
    "plain": lambda c: c,
    "spaces": lambda c: " ".join(c[i : i + 4] for i in range(0, 16, 4)),
    "dashes": lambda c: "-".join(c[i : i + 4] for i in range(0, 16, 4)),
    "underscores": lambda c: "_".join(c[i : i + 4] for i in range(0, 16, 4)),
    "commas": lambda c: ",".join(c[i : i + 4] for i in range(0, 16, 4)),
    "middle dots": lambda c: "\u00b7".join(c[i : i + 4] for i in range(0, 16, 4)),
    "bullets": lambda c: " \u2022 ".join(c[i : i + 4] for i in range(0, 16, 4)),
    "four spaces": lambda c: "    ".join(c[i : i + 4] for i in range(0, 16, 4)),
    "twenty spaces": lambda c: (" " * 20).join(c[i : i + 4] for i in range(0, 16, 4)),
    "pipes and tabs": lambda c: "|\t".join(c[i : i + 4] for i in range(0, 16, 4)),
    "newlines": lambda c: "\n".join(c[i : i + 4] for i in range(0, 16, 4)),
    "a letter glued before": lambda c: "x" + c,
    "a letter glued after": lambda c: c + "z",
    "letters glued on both sides": lambda c: "ref" + c + "ok",
    "keycap emoji": lambda c: "".join(d + "\ufe0f\u20e3" for d in c),
    "&nbsp;": lambda c: "&nbsp;".join(c[i : i + 4] for i in range(0, 16, 4)),
    "&#32;": lambda c: "&#32;".join(c[i : i + 4] for i in range(0, 16, 4)),
    "percent-encoded spaces": lambda c: "%20".join(c[i : i + 4] for i in range(0, 16, 4)),
    "full-width digits": lambda c: c.translate({ord(d): 0xFF10 + int(d) for d in "0123456789"}),
    "Arabic-Indic digits": lambda c: c.translate({ord(d): 0x0660 + int(d) for d in "0123456789"}),
    "Devanagari digits": lambda c: c.translate({ord(d): 0x0966 + int(d) for d in "0123456789"}),
    "circled digits": lambda c: c.translate({ord(d): 0x2460 + int(d) - 1 for d in "123456789"}),
    "zero-width spaces": lambda c: "\u200b".join(c),
    "JSON \\u escapes": lambda c: "".join(f"\\u{ord(d):04x}" for d in c),
    "Unicode dashes": lambda c: "\u2012".join(c[i : i + 4] for i in range(0, 16, 4)),
    "base64": b64,
    "hex": lambda c: c.encode().hex(),
    "percent x3": lambda c: q(q(q(" ".join(c[i : i + 4] for i in range(0, 16, 4))))),
}


@dataclass(frozen=True)
class Planted:
    """One value planted in one field, through one transport."""

    ident: int
    kind: str  # "email" or "card"
    field: str
    clothes: str
    transport: str
    canonical: str  # what a survivor is recognised by (lower-case address, card digits)
    text: str  # as planted
    halves: tuple[str, str] = ("", "")  # a value split over two attributes: each half


# ---- what an attacker does to every string the stack keeps or shows


def decoded(text: str) -> str:
    """`text` with every spelling undone, lower-case, written independently of
    `content.pii`: percent, HTML and backslash escapes (repeatedly), NFKC, format and
    combining characters removed, decimal digits as ASCII, other full stops and middle
    dots as ".", bracketed or spelt-out at/dot as "@" / "."."""
    for _ in range(10):
        if not any(c in text for c in "%&\\"):
            break
        before = text
        text = urllib.parse.unquote(html.unescape(text))
        text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
        text = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), text)
        text = re.sub(r"\\(?=[^\w\s])", "", text)  # a backslash before punctuation
        if text == before:
            break
    if not text.isascii():
        text = re.sub(r"[^\x00-\x7f]+", _plain_letters, unicodedata.normalize("NFKC", text))
    text = re.sub(r"\s*[(\[{<]\s*at\s*[)\]}>]\s*", "@", text, flags=re.I)
    text = re.sub(r"\s*[(\[{<]\s*dot\s*[)\]}>]\s*", ".", text, flags=re.I)
    text = re.sub(r"\s+at\s+", "@", re.sub(r"\s+dot\s+", ".", text, flags=re.I), flags=re.I)
    return text.lower()


def _plain_letters(match: re.Match[str]) -> str:
    """Non-ASCII characters without the invisible ones, digits as ASCII, full stops "."."""
    kept = []
    for c in match.group():
        if unicodedata.category(c) in ("Cf", "Mn", "Me"):
            continue
        dot = c in "\u3002\uff61\u00b7\u30fb"
        kept.append(str(unicodedata.decimal(c)) if c.isdecimal() else "." if dot else c)
    return "".join(kept)


def views(text: str, tokens: dict[str, list[str]]) -> list[str]:
    """`text` decoded, and every base64 or hex token in it decoded to text (printable UTF-8)
    and decoded; `tokens` remembers each token's texts."""
    found = [decoded(text)]
    for token in set(re.findall(r"[A-Za-z0-9+/_\-]{8,}={0,2}", text)):
        if token not in tokens:
            pieces = {token, *re.split(r"[/+_\-=]", token)}
            texts = (_printable(raw) for piece in pieces for raw in _token_bytes(piece))
            tokens[token] = [decoded(t) for t in texts if t]
        found += tokens[token]
    return found


def _printable(raw: bytes) -> str:
    """`raw` as UTF-8 text when it is printable text, else ""."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return "" if re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", text) else text


def _token_bytes(piece: str) -> Iterator[bytes]:
    if len(piece) % 2 == 0 and re.fullmatch(r"[0-9A-Fa-f]{8,}", piece):
        yield bytes.fromhex(piece)
    body = piece.rstrip("=").replace("-", "+").replace("_", "/")
    for skip in range(4):
        part = body[skip:]
        if len(part) >= 8 and len(part) % 4 != 1:
            try:
                yield base64.b64decode(part + "=" * (-len(part) % 4))
            except binascii.Error:
                continue


def survivors(planted: list[Planted], texts: list[str]) -> set[int]:
    """The planted values whose canonical form (or either half of a split one) is in any
    of `texts` once decoded: an address anywhere around an "@" of the text without spaces
    and quotes, a card's digits anywhere in the text without anything but digits."""
    tokens: dict[str, list[str]] = {}
    spaced = [v for t in set(texts) for v in views(t, tokens)]
    joined = "\n".join(spaced)
    compact = re.sub(r"\s+", "", joined).replace('"', "")
    around_at = {compact[max(0, m.start() - 80) : m.start() + 80]
                 for m in re.finditer("@", compact)}  # fmt: skip
    nearby = "\n".join(around_at)
    digits = "\n".join(re.sub(r"\D", "", v) for v in spaced)
    digit_runs = {digits[m.start() : m.start() + 16] for m in re.finditer("4", digits)}
    found = set()
    for value in planted:
        if value.halves[0]:
            seen = any(half.lower() in joined for half in value.halves)
        elif value.kind == "email":
            seen = value.canonical.replace('"', "") in nearby
        else:
            seen = value.canonical in digit_runs  # every planted card has 16 digits, from 4
        if seen:
            found.add(value.ident)
    return found


# ---- planting


def _card(ident: int) -> str:
    """A Luhn-valid card number of its own for each planted value: 4, 14 digits drawn from
    its id (no run of zeros a row of the store could hold by chance), the check digit."""
    drawn = int.from_bytes(hashlib.sha256(str(ident).encode()).digest()[:8], "big")
    body = f"4{drawn % 10**14:014d}"
    return body + next(str(d) for d in range(10) if luhn_valid(f"{body}{d}"))


def _kv(key: str, value: AnyValue) -> KeyValue:
    return KeyValue(key=key, value=value)


def _text(text: str) -> AnyValue:
    return AnyValue(string_value=text)


def _attribute(key: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(_: ResourceSpans, span: Span, text: str) -> None:
        span.attributes.append(_kv(key, _text(text)))

    return plant


def _event_attribute(key: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(_: ResourceSpans, span: Span, text: str) -> None:
        span.events.add(name="exception", time_unix_nano=NOW_NS).attributes.append(
            _kv(key, _text(text))
        )

    return plant


def _messages(text: str) -> str:
    return json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])


def _tool_call_output(text: str) -> str:
    call = {"type": "tool_call", "id": f"call {text}", "name": f"lookup {text}", "arguments": {}}
    return json.dumps([{"role": "assistant", "parts": [call], "finish_reason": text}])


def _set(target: str, name: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(resource_spans: ResourceSpans, span: Span, text: str) -> None:
        holder = {
            "resource": resource_spans,
            "scope": resource_spans.scope_spans[0].scope,
            "scope_spans": resource_spans.scope_spans[0],
            "span": span,
            "status": span.status,
        }[target]
        setattr(holder, name, text)

    return plant


def _link(field: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(_: ResourceSpans, span: Span, text: str) -> None:
        link = span.links.add(trace_id=b"\x7a" * 16, span_id=b"\x7b" * 8)
        if field == "trace_state":
            link.trace_state = "vendor=" + text
        else:
            link.attributes.append(_kv(field, _text(text)))

    return plant


def _attribute_key(_: ResourceSpans, span: Span, text: str) -> None:
    span.attributes.append(_kv(f"app.{text}", _text("v")))


def _array(key: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(_: ResourceSpans, span: Span, text: str) -> None:
        value = AnyValue()
        value.array_value.values.add().string_value = text
        nested = value.array_value.values.add().kvlist_value.values.add()
        nested.key, nested.value.string_value = f"k {text}", text
        span.attributes.append(_kv(key, value))

    return plant


def _bytes(_: ResourceSpans, span: Span, text: str) -> None:
    span.attributes.append(_kv("pathgrade.blob", AnyValue(bytes_value=text.encode())))


def _resource_attribute(key: str) -> Callable[[ResourceSpans, Span, str], None]:
    def plant(resource_spans: ResourceSpans, _: Span, text: str) -> None:
        resource_spans.resource.attributes.append(_kv(key, _text(text)))

    return plant


def _scope_attribute(resource_spans: ResourceSpans, _: Span, text: str) -> None:
    resource_spans.scope_spans[0].scope.attributes.append(_kv("owner", _text(text)))


def _content(
    operation: str, key: str, render: Callable[[str], str]
) -> Callable[[ResourceSpans, Span, str], None]:
    """Content of a span of `operation`, which the collector drops after reading facts."""

    def plant(_: ResourceSpans, span: Span, text: str) -> None:
        span.name = operation
        span.attributes.extend([_kv("gen_ai.operation.name", _text(operation)),
                                _kv(key, _text(render(text)))])  # fmt: skip

    return plant


def _query_name(_: ResourceSpans, span: Span, text: str) -> None:
    span.name = "GET /search?q=" + text


FIELDS: dict[str, Callable[[ResourceSpans, Span, str], None]] = {
    "attribute not allowed": _attribute("app.note"),
    "agent name": _attribute("gen_ai.agent.name"),
    "tool name": _attribute("gen_ai.tool.name"),
    "model name": _attribute("gen_ai.request.model"),
    "error type": _attribute("error.type"),
    "http route": _attribute("http.route"),
    "query string (url.full)": _attribute("url.full"),
    "pathgrade hint": _attribute("pathgrade.demo.scenario"),
    "conversation id": _attribute("gen_ai.conversation.id"),
    "session id": _attribute("session.id"),
    "tool call id": _attribute("gen_ai.tool.call.id"),
    "attribute key": _attribute_key,
    "array and nested key-value list, not allowed": _array("app.list"),
    "array and nested key-value list, allowed": _array("gen_ai.workflow.nodes"),
    "bytes": _bytes,
    "service name": _resource_attribute("service.name"),
    "resource attribute": _resource_attribute("host.owner"),
    "scope attribute": _scope_attribute,
    "scope name": _set("scope", "name"),
    "scope version": _set("scope", "version"),
    "resource schema URL": _set("resource", "schema_url"),
    "scope schema URL": _set("scope_spans", "schema_url"),
    "span name": _set("span", "name"),
    "query string in a span name": _query_name,
    "trace state": lambda _, span, text: setattr(span, "trace_state", "vendor=" + text),
    "status message": _set("status", "message"),
    "event name": lambda _, span, text: span.events.add(name=text, time_unix_nano=NOW_NS),
    "exception message": _event_attribute("exception.message"),
    "exception stack trace": _event_attribute("exception.stacktrace"),
    "exception type": _event_attribute("exception.type"),
    "link attribute": _link("who"),
    "link trace state": _link("trace_state"),
    "input messages (content)": _content("chat", "gen_ai.input.messages", _messages),
    "tool calls in output messages (facts)": _content(
        "chat", "gen_ai.output.messages", _tool_call_output
    ),
    "tool arguments' names (facts)": _content(
        "execute_tool", "gen_ai.tool.call.arguments", lambda text: json.dumps({text: 1})
    ),
}
EMAIL_FORMS = {
    "IP-literal domain": lambda ident: f"user{ident}@[192.0.2.{ident % 250}]",
    "quoted local part": lambda ident: f'"user{ident}"@mail{ident}.example.org',
}


@dataclass
class Batch:
    """One transport's request and what it plants."""

    request: ExportTraceServiceRequest
    planted: list[Planted]


def planted_batch(transport: str, start: int) -> Batch:
    """Every field x every encoding class, each value in a span (and resource and scope) of
    its own; one trace per field; plus numbers, ids and split values."""
    request = ExportTraceServiceRequest()
    planted: list[Planted] = []
    ident = start

    def add(field: str, clothes: str, kind: str, canonical: str, text: str, plant) -> None:
        nonlocal ident
        resource_spans = request.resource_spans.add()
        resource_spans.scope_spans.add()
        trace = (sum(map(ord, field + transport)) % 2**60 + 1).to_bytes(16, "big")
        span = resource_spans.scope_spans[0].spans.add(
            trace_id=trace, span_id=(ident + 1).to_bytes(8, "big"), name="planted",
            kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=NOW_NS,
            end_time_unix_nano=NOW_NS + 1000,
        )  # fmt: skip
        plant(resource_spans, span, text)
        planted.append(Planted(ident, kind, field, clothes, transport, canonical, text))
        ident += 1

    for field, plant in FIELDS.items():
        for clothes, wear in EMAIL_CLOTHES.items():
            email = f"user{ident}@mail{ident}.example.org"
            add(field, clothes, "email", email, wear(email), plant)
        for clothes, form in EMAIL_FORMS.items():
            email = form(ident)
            add(field, clothes, "email", email.lower(), email, plant)
        for clothes, wear in CARD_CLOTHES.items():
            card = _card(ident)
            add(field, clothes, "card", card, wear(card), plant)
    for key in ("app.amount", "gen_ai.request.seed", "gen_ai.conversation.id"):
        card = _card(ident)
        add(f"number ({key})", "int", "card", card, card,
            lambda _, span, text, key=key: span.attributes.append(
                _kv(key, AnyValue(int_value=int(text)))))  # fmt: skip
    for field in ("trace_id", "span_id"):
        card = _card(ident)
        size = 16 if field == "trace_id" else 8
        add(f"{field} holding a card", "hex id", "card", card, card,
            lambda _, span, text, field=field, size=size: setattr(
                span, field, bytes.fromhex(text.rjust(2 * size, "0"))))  # fmt: skip
    _split(add, planted, ident_of=lambda: ident)
    return Batch(request, planted)


def _split(add, planted: list[Planted], ident_of: Callable[[], int]) -> None:
    """Values split over two attributes that are not allowed (each half unique)."""
    for kind in ("email", "card"):
        ident = ident_of()
        if kind == "email":
            halves = (f"splitlocal{ident}", f"@splitdomain{ident}.example.org")
        else:
            card = _card(ident)
            halves = (f"{card[:8]}-", f"-{card[8:]}")

        def plant(_: ResourceSpans, span: Span, text: str, halves=halves) -> None:
            span.attributes.extend([_kv("app.part1", _text(halves[0])),
                                    _kv("app.part2", _text(halves[1]))])  # fmt: skip

        add("split over two attributes", kind, kind, "".join(halves), "".join(halves), plant)
        last = planted[-1]
        planted[-1] = Planted(last.ident, kind, last.field, last.clothes, last.transport,
                              last.canonical, last.text, halves)  # fmt: skip


def request_body(request: ExportTraceServiceRequest, transport: str) -> bytes:
    """The request as raw OTLP protobuf or OTLP/JSON (hex ids, as the spec writes them)."""
    if transport == "protobuf":
        return request.SerializeToString()
    document = json_format.MessageToDict(request)
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for holder in [span, *span.get("links", [])]:
                    for name in ("traceId", "spanId", "parentSpanId"):
                        if name in holder:
                            holder[name] = base64.b64decode(holder[name]).hex()
    return json.dumps(document).encode()


# ---- reading what the stack keeps and shows


def topic_texts(bootstrap: str) -> list[str]:
    """Every message of `pathgrade.spans`: its key, every string and bytes value in it, and
    its raw bytes read as text."""
    texts = []
    for message in read_topic(bootstrap, SPANS_TOPIC):
        texts.append(message.key.decode())
        texts.append(message.value.decode("utf-8", "replace"))
        texts += _strings(TracesData.FromString(message.value))
    return texts


def _strings(message) -> list[str]:
    found = []
    for field, value in message.ListFields():
        items = value if field.is_repeated else [value]
        for item in items:
            if field.type == field.TYPE_MESSAGE:
                found += _strings(item)
            elif isinstance(item, str):
                found.append(item)
            elif isinstance(item, bytes):
                found += [item.decode("utf-8", "replace"), item.hex()]
    return found


def store_texts(process: PathgradeProcess) -> list[str]:
    """Every row of every table of the store, every column as text (an aggregate state,
    which a client cannot read and which holds hashes, not text, as its final value)."""
    columns = process.sql(
        "SELECT table, groupArray(if(type LIKE 'AggregateFunction(%', "
        "concat('finalizeAggregation(`', name, '`)'), concat('`', name, '`'))) "
        "FROM system.columns WHERE database = currentDatabase() AND table IN (SELECT name "
        "FROM system.tables WHERE database = currentDatabase() AND engine NOT LIKE '%View%') "
        "GROUP BY table"
    ).rows
    texts = []
    for table, selected in columns:
        result = process.sql(f"SELECT {', '.join(selected)} FROM `{table}`")
        texts += [" | ".join(map(str, row)) for row in result.rows]
    return texts


def fetch_once_found(url: str) -> str:
    """The page at `url` once it is no longer 404: a span is readable a moment before the
    rows its insert's views write into the lookup tables the page reads."""

    def page() -> str | None:
        try:
            return fetch(url)
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            return None

    return wait_until(page, timeout_s=60)


def ui_texts(ui: str, process: PathgradeProcess) -> list[str]:
    """The trace list, every trace page, and every conversation page."""
    pages = [fetch(ui + "/traces")]
    for (trace_id,) in process.sql("SELECT DISTINCT TraceId FROM spans").rows:
        pages.append(fetch_once_found(f"{ui}/trace/{trace_id}"))
    conversations = process.sql(
        "SELECT DISTINCT GenAIConversationId FROM spans WHERE GenAIConversationId != ''"
    ).rows
    for (conversation,) in conversations:
        pages.append(fetch_once_found(f"{ui}/conversation/{q(conversation)}"))
    return pages


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PathgradeProcess, Path]]:
    """`pathgrade up` on default settings."""
    data_dir = tmp_path_factory.mktemp("planted")
    process, _, http_port = start_stack(data_dir, "--status-every", "2")
    process.http_url = f"http://127.0.0.1:{http_port}/v1/traces"  # type: ignore[attr-defined]
    yield process, data_dir
    assert process.terminate() == 0, process.output


def _send(process: PathgradeProcess, request: ExportTraceServiceRequest, transport: str) -> None:
    """Post `request`; every span must be accepted."""
    url = process.http_url  # type: ignore[attr-defined]
    status, answer = post(url, request_body(request, transport), CONTENT_TYPES[transport])
    assert status == 200, answer[:500]
    if transport == "protobuf":
        rejected = ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans
    else:
        rejected = int(
            json.loads(answer or b"{}").get("partialSuccess", {}).get("rejectedSpans", 0)
        )
    assert rejected == 0, answer[:500]


def test_nothing_planted_survives_on_default_settings(
    stack: tuple[PathgradeProcess, Path],
) -> None:
    process, data_dir = stack
    batches = [planted_batch("protobuf", 1), planted_batch("json", 100_000)]
    planted = [value for batch in batches for value in batch.planted]
    for batch in batches:  # the search finds each value where it was planted
        unseen = [v for v in batch.planted if v.ident not in survivors([v], [v.text])]
        assert unseen == [], [(v.field, v.clothes) for v in unseen[:5]]
    for batch, transport in zip(batches, ("protobuf", "json"), strict=True):
        _send(process, batch.request, transport)
    spans = sum(len(ss.spans) for b in batches for rs in b.request.resource_spans
                for ss in rs.scope_spans)  # fmt: skip
    wait_until(lambda: process.scalar("SELECT count() FROM spans FINAL") >= spans, timeout_s=180)
    state = json.loads((data_dir / "stack.json").read_text())
    outputs = {
        "topic": topic_texts(state["kafka"]),
        "store": store_texts(process),
        "ui": ui_texts(state["ui_url"], process),
    }
    found = {where: survivors(planted, texts) for where, texts in outputs.items()}
    everywhere = set().union(*found.values())
    by_ident = {v.ident: v for v in planted}
    print(f"\nplanted values surviving: {len(everywhere)} / {len(planted)} planted "
          f"({len(FIELDS) + 6} fields, {len(EMAIL_CLOTHES) + len(EMAIL_FORMS)} e-mail and "
          f"{len(CARD_CLOTHES)} card encodings, protobuf and JSON)")  # fmt: skip
    for where, idents in found.items():
        print(f"  {where}: {len(idents)}")
    for (field, clothes), count in Counter(
        (by_ident[i].field, by_ident[i].clothes) for i in everywhere
    ).most_common(40):
        print(f"    {field} / {clothes}: {count}")
    assert everywhere == set()


def test_two_users_whose_conversation_ids_hold_cards_keep_two_conversations(
    stack: tuple[PathgradeProcess, Path],
) -> None:
    """Each conversation id becomes its own keyed fingerprint (never a shared mark), so
    the store and the conversation page keep the two users apart."""
    process, data_dir = stack
    request = ExportTraceServiceRequest()
    ids = {"4111 1111 1111 1111": 0xA1, "5555-5555-5555-4444": 0xB2}
    for conversation, byte in ids.items():
        span = request.resource_spans.add().scope_spans.add().spans.add(
            trace_id=bytes([byte]) * 16, span_id=bytes([byte]) * 8,
            name="invoke_agent support", kind=Span.SPAN_KIND_INTERNAL,
            start_time_unix_nano=NOW_NS, end_time_unix_nano=NOW_NS + 10**9,
        )  # fmt: skip
        span.attributes.extend(
            [_kv("gen_ai.operation.name", _text("invoke_agent")),
             _kv("gen_ai.agent.name", _text("support")),
             _kv("gen_ai.conversation.id", _text(f"conv {conversation}"))]
        )  # fmt: skip
    _send(process, request, "protobuf")
    traces = [f"{byte:02x}" * 16 for byte in ids.values()]
    listed = ",".join(f"'{t}'" for t in traces)
    query = f"SELECT TraceId, GenAIConversationId FROM spans FINAL WHERE TraceId IN ({listed})"
    wait_until(lambda: len(process.sql(query).rows) == 2, timeout_s=60)
    conversation_of = dict(process.sql(query).rows)
    assert len(set(conversation_of.values())) == 2, conversation_of
    ui = json.loads((data_dir / "stack.json").read_text())["ui_url"]
    for trace_id, conversation in conversation_of.items():
        assert "1111" not in conversation and "4444" not in conversation
        page = fetch_once_found(f"{ui}/conversation/{q(conversation)}")
        other = next(t for t in traces if t != trace_id)
        assert trace_id in page and other not in page
