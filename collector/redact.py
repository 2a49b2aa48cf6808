"""Redaction: what the collector removes, withholds or scrubs before a span leaves it, and
the facts it records about what it saw (`schemas.facts`).

Per span, in place:

1. Facts (with a `FactMaker`): computed from the raw values of the span's content,
   identity and confirmed-action attributes before anything is removed or scrubbed.
2. Attributes that are not opted in are removed: tool arguments/results unless the tool
   is listed in `capture_tools`; message content (prompts, completions, system
   instructions, the attributes of content-carrying events) unless `capture_messages`;
   the session identity (`enduser.id`, `user.id`, OpenLLMetry's `user_id` association
   property) unless `capture_identity`; a `pathgrade.confirmed_action` unless its tool is
   captured. A span that lost attributes gets `pathgrade.redacted.keys` (int): how many
   were removed from it and its events, so readers can tell "redacted" from "absent".
3. Forward by allow-list (`schemas.allowed_keys`, matched by `collector.allow_list`): every
   other attribute (of the span, its events and links, its resource and scope) is
   forwarded as text only when its key is allowed (the default list plus `allowed_keys`);
   any other value is withheld: it becomes its mark (`content.withheld`: its type, its
   keyed fingerprint under the tenant's fact key, the kinds of personal data found in it),
   whatever it holds; a boolean and an empty string travel as they are. A JSON object under a key of
   `allowed_keys.ALLOWED_MEMBERS` (OpenInference's `metadata`) travels as its structural
   members only (LangGraph's node, step, triggers...). An attribute key that does not look
   like one, or holds personal data, is withheld the same way (and so is its value). The
   span's status message is withheld unless `allowed_keys` names `status.message`.
4. Everything forwarded as text is scrubbed (`content.pii`, after a normalisation that
   undoes encodings): allowed values (nested arrays and key-value lists included; bytes as
   UTF-8 text; integers and floats that hold a card number), kept content, span and event
   names, `trace_state` of the span and its links, scope name and version, the schema
   URLs. E-mail addresses become `[REDACTED:email]`, card numbers `[REDACTED:card]`,
   matches of the configured extra patterns `[REDACTED]`. An identifier
   (`allowed_keys.IDENTIFIER_KEYS`: conversation, session, tool-call ids...) that scrubbing
   would change becomes its keyed fingerprint instead, so two users' ids stay two; so does
   a trace or span id (of the span, its parent, its links) whose hex holds a card number
   (16 or 8 bytes of the fingerprint: every reference to it maps alike).
5. With facts, what was found is recorded per field: `pathgrade.facts.pii.scrubbed`
   (replaced or withheld in what is forwarded) and `pathgrade.facts.pii.dropped` (in what
   was removed). The collector's facts are clean by construction (names and ids in them
   scrubbed); facts a producer set are scrubbed except their fingerprints (hex, which can
   look like a card's digits).
"""

from __future__ import annotations

import itertools
import json
import secrets
from collections.abc import Iterable, Mapping, MutableSequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from pathgrade.collector.allow_list import AllowList, looks_like_key
from pathgrade.collector.facts import (
    CONTEXT_KEYS,
    DECLINED_WHOLE,
    NOT_READ,
    FactMaker,
    record_content,
    splice_attributes,
    write_facts,
)
from pathgrade.collector.forwarded import (
    ForwardedResource,
    ForwardedScope,
    ForwardedSpan,
    ForwardedSpans,
)
from pathgrade.collector.forwarding import Forwarding
from pathgrade.collector.redaction_config import RedactionConfig
from pathgrade.content.event_content import event_content
from pathgrade.content.events import read_messages
from pathgrade.content.fingerprints import SECRET_BYTES, FactSecret, TenantKey, is_fingerprint
from pathgrade.content.memo import BoundedMemo
from pathgrade.content.messages import GrowingArrays
from pathgrade.content.otlp import any_value, structured_value
from pathgrade.content.otlp_logs import EVENT_NAME_ATTRIBUTE
from pathgrade.content.pii import PiiScanner, add_counts, card_number, id_holds_card
from pathgrade.content.withheld import KEY_TYPE, withheld_mark
from pathgrade.schemas import genai
from pathgrade.schemas.allowed_keys import ALLOWED_MEMBERS, IDENTIFIER_KEYS, STATUS_MESSAGE_FIELD
from pathgrade.schemas.decline import Decision, declined
from pathgrade.schemas.facts import FACT_KEYS, PiiRecord
from pathgrade.schemas.json_text import parse_json
from pathgrade.schemas.personal_data import CARD, CARD_MARK, Counts
from pathgrade.schemas.topics import DEFAULT_TENANT

CAPTURE_ALL_TOOLS: Final = "*"

# Keys that carry tool arguments/results on tool spans and message content elsewhere.
_TOOL_OR_MESSAGE_KEYS = frozenset(
    {genai.OI_INPUT_VALUE, genai.OI_OUTPUT_VALUE, genai.TL_ENTITY_INPUT, genai.TL_ENTITY_OUTPUT}
)
# Key verdicts of the attribute scan (`Forwarding`), as plain ints for the hot loop.
_CONTENT, _CONTEXT, _FACT, _ALLOWED, _IDENTIFIER, _WITHHELD, _KEY_WITHHELD, _MEMBERS = map(
    int, Forwarding
)
_NOTHING: Final[Counts] = {}
_NO_PII: Final[Mapping[str, Counts | None]] = {}
_MIN_CARD, _MAX_CARD = 10**12, 10**19  # numbers of 13-19 digits
_MAX_CACHED_KEYS = 4096
_SPAN_IDS = ("trace_id", "span_id", "parent_span_id")
_RECORD_IDS = ("trace_id", "span_id")
_MESSAGES = frozenset({genai.INPUT_MESSAGES, genai.OUTPUT_MESSAGES})
"""The messages an inference record's facts read as JSON text (`events.read_messages`)."""
BODY_FIELD: Final = "body"
"""A log record's body as the pii records name it."""
_REDACTORS = itertools.count(1)
_new_tuple = tuple.__new__
"""Makes a `ForwardedSpan` per span without the named tuple's Python `__new__` (a third
of the cost)."""
_MIN_GROWING_CHARS = 256  # longer message arrays (which the scanner does not remember) are read
# incrementally when they grow


@dataclass(slots=True)
class RedactionStats:
    """What one `Redactor.redact` call did: spans seen, attributes removed, items of
    personal data replaced in what is forwarded, values withheld, spans that got facts."""

    spans: int = 0
    removed_attributes: int = 0
    scrubbed_values: int = 0
    withheld_values: int = 0
    spans_with_facts: int = 0
    whole_spans: int = 0
    """Spans the fact kernel wrote whole (`Redactor.forward`, when nothing is captured)."""
    spliced_facts: int = 0
    """Spans redacted in Python whose kernel facts were spliced into their encoding."""

    def scrubbed(self, record: PiiRecord, field: str, counts: Counts) -> None:
        """Note `counts` found and replaced in `field`."""
        self.scrubbed_values += sum(counts.values())
        add_counts(record.setdefault(field, {}), counts)


class _KernelAnswers(NamedTuple):
    """The fact kernel's reading of one request: each span's facts answer
    (`FactMaker.request_facts`) and, when it wrote spans whole, each span's encoding
    (`DECLINED_WHOLE` for a span the redactor redacts)."""

    answers: list[Any]
    encodings: list[Decision[bytes]] | None


class _Findings:
    """Personal data found in one span's fields: scrubbed (forwarded) and dropped."""

    __slots__ = ("dropped", "scrubbed")

    def __init__(self, shared: PiiRecord | None = None) -> None:
        self.scrubbed: PiiRecord = {k: dict(v) for k, v in shared.items()} if shared else {}
        self.dropped: PiiRecord = {}


@dataclass(slots=True)
class _ReadRecord:
    """One log record between reading and settling (`Redactor.redact_logs`): its findings,
    whether it has a body, its content's indexes and (key, raw value) pairs, its context
    values, whether a producer set facts on it, its confirmed actions' indexes, and the raw
    values its facts read (`record_content`)."""

    record: logs_pb2.LogRecord
    found: _Findings
    has_body: bool
    content: list[int] = field(default_factory=list)
    read: list[tuple[str, Any]] | None = None
    context: dict[str, Any] = field(default_factory=dict)
    producer_facts: bool = False
    confirmed: list[int] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def _kernel_reads(item: _ReadRecord) -> bool:
    """Whether the fact kernel can answer for a record as Python would: no body, no fact a
    producer set, and its content attributes (each key once) exactly the content of its raw
    values, as text, so the pii.dropped record the kernel writes of those texts is the one
    `Redactor._note_dropped` notes of the attributes."""
    if item.has_body or item.producer_facts or not item.read:
        return False
    raw = item.raw
    keys = {k for k, _ in item.read}
    return (
        len(keys) == len(item.read)
        and all(isinstance(raw.get(k), str) for k in keys)
        and sum(1 for k in raw if genai.is_content_key(k)) == len(keys)
    )


def _note(record: PiiRecord, field: str, counts: Counts) -> None:
    add_counts(record.setdefault(field, {}), counts)


class Redactor:
    """Applies a `RedactionConfig` to export requests, in place; with a `FactMaker`, also
    records each span's facts before removing anything.

    Fingerprints (of withheld values and of identifiers that need scrubbing) are keyed per
    tenant by `secret`, else the fact maker's, else a random secret of this redactor's own.
    One pass per attribute list: each key's verdict and each short string's scrubbed form
    are remembered (bounded), since agents repeat the same keys and many of the values.
    """

    def __init__(
        self, config: RedactionConfig, facts: FactMaker | None = None,
        secret: FactSecret | None = None,
    ) -> None:  # fmt: skip
        self.config = config
        self.facts = facts
        if secret is None:
            secret = facts.secret if facts is not None else _random_secret()
        self.secret = secret
        self.scanner = _shared_scanner(facts, config.extra_patterns)
        self.allowed = AllowList(config.allowed_keys)
        self._status_allowed = self.allowed.allows(STATUS_MESSAGE_FIELD)
        self._all_tools = CAPTURE_ALL_TOOLS in config.capture_tools
        self._captured_tools = frozenset(config.capture_tools)
        self._verdicts: BoundedMemo[str, int] = BoundedMemo(_MAX_CACHED_KEYS)
        self._verdicts_id = next(_REDACTORS)  # what the fact kernel remembers them under
        self._dropped_arrays = GrowingArrays(self.scanner.find, _added)
        self._policies: dict[tuple[bool, bool, bool], _ContentPolicy] = {}
        self._drops_all = not (
            config.capture_tools or config.capture_messages or config.capture_identity
        )
        self._kept_keys = _kept_keys(config)

    def redact(
        self, request: ExportTraceServiceRequest, tenant: str = DEFAULT_TENANT,
        body: bytes | None = None,
    ) -> RedactionStats:  # fmt: skip
        """Record facts, remove content that is not opted in, withhold what is not allowed,
        scrub every string left, all in place: `request` is then as it may leave (what
        `forward` encodes, for reading it back). `body`: the bytes `request` was parsed
        from, when it holds exactly their spans (the fact kernel then reads them,
        `collector.facts`)."""
        return self._redact_request(request, tenant, body, None)

    def forward(
        self, request: ExportTraceServiceRequest, tenant: str = DEFAULT_TENANT,
        body: bytes | None = None,
    ) -> ForwardedSpans:  # fmt: skip
        """The collector's redaction step: `redact`'s spans as they may leave, encoded
        (`ForwardedSpans`, the only input grouping takes). Each span is written by one of
        two implementations, chosen per span in `_redact_request`: the fact kernel writes it whole
        when nothing is captured and it can (the request's span is then left as it came,
        content included, and never encoded), else the Python redactor redacts it in
        place and the kernel's facts, when they are all it adds, are spliced into its
        encoding (cheaper than merging them)."""
        resources: list[ForwardedResource] = []
        stats = self._redact_request(request, tenant, body, resources)
        return ForwardedSpans(resources, stats)

    def _redact_request(
        self, request: ExportTraceServiceRequest, tenant: str, body: bytes | None,
        forwarded: list[ForwardedResource] | None,
    ) -> RedactionStats:  # fmt: skip
        """`redact`, and with `forwarded` (`forward`) each resource as it leaves appended
        to it."""
        stats = RedactionStats()
        kernel = self._kernel_answers(request, tenant, body, forwarded is not None, stats)
        whole = kernel.encodings if kernel is not None else None
        key = self.secret.for_tenant(tenant)
        ordinal = 0
        for resource_spans in request.resource_spans:
            shared = self._redact_resource(resource_spans, stats, key)
            scopes: list[ForwardedScope] = []
            for scope_spans in resource_spans.scope_spans:
                scoped = self._redact_scope(scope_spans, shared, stats, key)
                spans: list[ForwardedSpan] = []
                for span in scope_spans.spans:
                    # the one place a span's implementation is chosen: the kernel's whole
                    # encoding when it wrote one, else the Python redactor
                    encoding = whole[ordinal] if whole is not None else NOT_READ
                    if not declined(encoding):
                        spans.append(_new_tuple(ForwardedSpan, (span.trace_id, span.span_id,
                                                                encoding)))  # fmt: skip
                    else:
                        written = self._python_span(
                            span, ordinal, kernel, tenant, key, scoped, stats,
                            forwarded is not None,
                        )  # fmt: skip
                        if written is not None:
                            spans.append(written)
                    ordinal += 1
                if forwarded is not None:
                    scope = scope_spans.scope.SerializeToString()
                    scopes.append(ForwardedScope(scope, scope_spans.schema_url, spans))
            if forwarded is not None:
                resource = resource_spans.resource.SerializeToString()
                forwarded.append(ForwardedResource(resource, resource_spans.schema_url, scopes))
        stats.spans = ordinal
        return stats

    def _python_span(
        self, span: trace_pb2.Span, ordinal: int, kernel: _KernelAnswers | None, tenant: str,
        key: TenantKey, scoped: PiiRecord, stats: RedactionStats, encode: bool,
    ) -> ForwardedSpan | None:  # fmt: skip
        """A span redacted here, in place (with the kernel's facts answer when it gave
        one). With `encode`, the span as it leaves; else None (facts merged)."""
        answer = kernel.answers[ordinal] if kernel is not None else NOT_READ
        left = self._redact_span(span, tenant, key, _Findings(scoped), stats, answer, encode)
        if not encode:
            return None
        encoding = span.SerializeToString()
        if left:
            encoding = splice_attributes(encoding, left)
            stats.spliced_facts += 1
        return _new_tuple(ForwardedSpan, (span.trace_id, span.span_id, encoding))

    def redact_logs(
        self, request: ExportLogsServiceRequest, tenant: str = DEFAULT_TENANT
    ) -> RedactionStats:
        """A logs request's records as `redact` treats spans, in place: facts first (from
        the raw content: the messages the record carries, `content.events.event_messages`,
        and its content attributes), then the record's content removed unless captured
        (content attributes by the span rules; the body is content: kept with
        `capture_messages`), every other attribute forwarded by the allow-list, every string
        left scrubbed (the event name, the severity text, a kept body); a record whose
        trace or span id holds a card gets fingerprint bytes instead. When nothing is
        captured, the fact kernel answers for the records it can (`_kernel_reads`), all in
        one call. `stats.spans` counts the records."""
        stats = RedactionStats()
        key = self.secret.for_tenant(tenant)
        read = []
        for resource_logs in request.resource_logs:
            shared = self._redact_resource(resource_logs, stats, key)
            for scope_logs in resource_logs.scope_logs:
                scoped = self._redact_scope(scope_logs, shared, stats, key)
                read.extend(
                    self._read_record(record, key, _Findings(scoped), stats)
                    for record in scope_logs.log_records
                )
        answers = self._record_answers(read, tenant)
        for index, item in enumerate(read):
            answer = answers[index] if answers is not None else NOT_READ
            self._settle_record(item, tenant, key, stats, answer)
        stats.spans = len(read)
        return stats

    def _record_answers(self, read: list[_ReadRecord], tenant: str) -> list[Any] | None:
        """The fact kernel's answer per record (`FactMaker.records_facts`; declined: Python
        computes it) when nothing is captured and there is a kernel, else None."""
        if self.facts is None or self.facts.kernel is None or not self._drops_all:
            return None
        return self.facts.records_facts(
            [(item.record.trace_id, item.raw) if _kernel_reads(item) else None for item in read],
            tenant,
        )

    def _redact_resource(self, holder: Any, stats: RedactionStats, key: TenantKey) -> PiiRecord:
        """Forward a resource's attributes and scrub its schema URL (of `ResourceSpans` or
        `ResourceLogs`); returns what was found, which its items' facts note too."""
        shared: PiiRecord = {}
        self._forward_list(holder.resource.attributes, shared, "resource:", stats, key)
        holder.schema_url = self._scrub_field(holder.schema_url, shared, "schema_url", stats)
        return shared

    def _redact_scope(
        self, holder: Any, shared: PiiRecord, stats: RedactionStats, key: TenantKey
    ) -> PiiRecord:
        """Forward a scope's attributes, scrub its name, version and schema URL (of
        `ScopeSpans` or `ScopeLogs`); returns what was found, the resource's included."""
        scoped = {k: dict(v) for k, v in shared.items()}
        scope = holder.scope
        self._forward_list(scope.attributes, scoped, "scope:", stats, key)
        scope.name = self._scrub_field(scope.name, scoped, "scope.name", stats)
        scope.version = self._scrub_field(scope.version, scoped, "scope.version", stats)
        holder.schema_url = self._scrub_field(holder.schema_url, scoped, "scope.schema_url", stats)
        return scoped

    def _read_record(
        self, record: logs_pb2.LogRecord, key: TenantKey, found: _Findings,
        stats: RedactionStats,
    ) -> _ReadRecord:  # fmt: skip
        """Forward a record's attributes that are not content and read its raw content (see
        `redact_logs`): what settling it needs."""
        attributes = record.attributes
        has_body = record.HasField("body")
        item = _ReadRecord(record, found, has_body)
        read: list[tuple[str, Any]] | None = [] if self.facts is not None else None
        item.content, item.producer_facts, item.confirmed = self._scan(
            attributes, item.context, found.scrubbed, "", stats, key, read,
            record.event_name == genai.EVENT_INFERENCE_DETAILS,
        )  # fmt: skip
        if read is not None:
            name = record.event_name or _raw_event_name(attributes)
            body = any_value(record.body) if has_body else None
            item.raw = raw = record_content(name, dict(read), item.context, body)
            # the JSON text of structured messages, written once for the facts, is what
            # `_note_dropped` reads of them too
            read[:] = [(k, raw[k] if isinstance(raw.get(k), str) else v) for k, v in read]
        item.read = read
        return item

    def _settle_record(
        self, item: _ReadRecord, tenant: str, key: TenantKey, stats: RedactionStats,
        answer: Any = NOT_READ,
    ) -> None:  # fmt: skip
        """Facts (the kernel's `answer`: None or encoded attributes; declined: computed here),
        then the record's content and body removed unless kept, its ids and strings
        scrubbed (see `redact_logs`)."""
        record, found, attributes = item.record, item.found, item.record.attributes
        facts: dict[str, Any] = {}
        encoded = known_pii = None
        if declined(answer) and item.raw and self.facts is not None:
            facts = self.facts.facts("", item.raw, tenant, record.trace_id)
        elif not declined(answer):  # the kernel's: facts and the content's pii.dropped record
            encoded, known_pii = answer, _NO_PII
        keep = self._policy(item.context, attributes, item.confirmed)
        removed = self._settle(
            attributes, item.content, keep, found, "", stats, key, record.trace_id, item.read,
            known_pii,
        )  # fmt: skip
        if item.has_body and keep.messages:
            counts = self._scrub_value(record.body)
            if counts:
                stats.scrubbed(found.scrubbed, BODY_FIELD, counts)
        elif item.has_body:
            if self.facts is not None:
                dropped: Counts = {}
                self._find_in(record.body, dropped)
                if dropped:
                    _note(found.dropped, BODY_FIELD, dropped)
            record.ClearField("body")
            removed += 1
        self._scrub_ids(record, _RECORD_IDS, key, found.scrubbed, "", stats)
        record.event_name = self._scrub_field(
            record.event_name, found.scrubbed, "event_name", stats
        )
        record.severity_text = self._scrub_field(
            record.severity_text, found.scrubbed, "severity_text", stats
        )
        if removed:
            attributes.add(key=genai.PG_REDACTED_KEYS).value.int_value = removed
        stats.removed_attributes += removed
        if self.facts is None or not (facts or encoded or found.scrubbed or found.dropped):
            return
        stats.spans_with_facts += 1
        write_facts(record, facts, found.scrubbed, found.dropped, item.producer_facts, encoded)

    def _kernel_answers(
        self, request: ExportTraceServiceRequest, tenant: str, body: bytes | None,
        whole: bool, stats: RedactionStats,
    ) -> _KernelAnswers | None:  # fmt: skip
        """The fact kernel's answer per span of `body`, and with `whole` its whole encoding
        per span (counted in `stats`) where no content is kept (nothing captured, or
        no key `_kept_keys` names in the span), when there is a kernel and it read as many
        spans as `request` holds; None otherwise (every span in Python)."""
        if body is None or self.facts is None:
            return None
        kept = self._kept_keys
        drops_all = self._drops_all or kept is not None  # but for the spans holding a kept key
        if whole and drops_all:
            answered = self.facts.request_whole(
                body, tenant, self.forwarding, self._verdicts_id, kept
            )
            answers = answered.answers if answered is not None else None
        else:
            answered, answers = None, self.facts.request_facts(body, tenant, drops_all, kept)
        spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        if answers is None or len(answers) != spans:
            return None
        if answered is None:
            return _KernelAnswers(answers, None)
        stats.removed_attributes += answered.removed
        stats.withheld_values += answered.withheld
        stats.spans_with_facts += answered.with_facts
        stats.whole_spans += len(answered.encodings) - answered.encodings.count(DECLINED_WHOLE)
        return _KernelAnswers(answers, answered.encodings)

    def scrub_text(self, text: str) -> str:
        """`text` with e-mails, card numbers and extra-pattern matches replaced."""
        return self.scanner.scrub(text)[0]

    def forwarding(self, key: str) -> int:
        """How an attribute `key` is forwarded (a `Forwarding` verdict); the fact kernel asks
        it too, for the spans it writes whole."""
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._verdicts.put(key, self._verdict(key))
        return verdict

    def _verdict(self, key: str) -> int:
        if genai.is_content_key(key):
            return _CONTENT
        if key in CONTEXT_KEYS:
            return _CONTEXT
        if key in FACT_KEYS:
            return _FACT
        if not self._key_is_clean(key):
            return _KEY_WITHHELD
        if self.allowed.allows(key):
            return _IDENTIFIER if key in IDENTIFIER_KEYS else _ALLOWED
        return _MEMBERS if key in ALLOWED_MEMBERS else _WITHHELD

    def _key_is_clean(self, key: str) -> bool:
        """True when `key` may be forwarded as it is: it looks like a key and holds no
        personal data."""
        return looks_like_key(key) and not self.scanner.scrub(key)[1]

    def _redact_span(
        self, span: trace_pb2.Span, tenant: str, key: TenantKey, found: _Findings,
        stats: RedactionStats, answer: Any = NOT_READ, splice: bool = False,
    ) -> bytes | None:  # fmt: skip
        """Facts first (from raw values, or the kernel's `answer`: see
        `FactMaker.request_facts`; declined: computed here), then remove the span's unkept
        content (span and events), withhold what is not allowed and scrub everything left.
        With `splice`, returns the kernel's encoded facts instead of merging them when they
        are all the span's facts change (for the caller to splice into its encoding)."""
        encoded, known_pii = answer, _NO_PII  # what the kernel wrote, found
        if answer.__class__ is tuple:
            encoded, known_pii = answer
        elif declined(answer):
            encoded = None
        attributes = span.attributes
        context: dict[str, Any] = {}
        computes = declined(answer) and self.facts is not None
        read: list[tuple[str, Any]] | None = [] if computes else None
        content, producer_facts, confirmed = self._scan(
            attributes, context, found.scrubbed, "", stats, key, read
        )
        facts: dict[str, Any] = {}
        from_events = _event_content(span, context) if computes and span.events else {}
        if (read or from_events) and self.facts is not None:
            raw = {**from_events, **dict(read or ())}  # the span's own attributes win
            raw.update(context)
            facts = self.facts.facts(span.name, raw, tenant, span.trace_id)
        keep = self._policy(context, attributes, confirmed)
        if computes or self.facts is None:
            known_pii = None
        removed = self._settle(
            attributes, content, keep, found, "", stats, key, span.trace_id, read, known_pii
        )
        for event in span.events:
            removed += self._redact_event(event, keep, found, stats, key)
        for link in span.links:
            self._forward_list(link.attributes, found.scrubbed, "link:", stats, key)
            link.trace_state = self._scrub_field(
                link.trace_state, found.scrubbed, "link.trace_state", stats
            )
            self._scrub_ids(link, ("trace_id", "span_id"), key, found.scrubbed, "link.", stats)
        self._scrub_ids(span, _SPAN_IDS, key, found.scrubbed, "", stats)
        span.name = self._scrub_field(span.name, found.scrubbed, "name", stats)
        span.trace_state = self._scrub_field(span.trace_state, found.scrubbed, "trace_state", stats)
        status = span.status
        if status.message:
            if self._status_allowed:
                status.message = self._scrub_field(
                    status.message, found.scrubbed, "status.message", stats
                )
            else:
                status.message = self._withheld_text(
                    status.message, key, found.scrubbed, STATUS_MESSAGE_FIELD, stats
                )
        if removed:  # before the facts: a span's spliced facts go after its attributes
            attributes.add(key=genai.PG_REDACTED_KEYS).value.int_value = removed
        stats.removed_attributes += removed
        if self.facts is None or not (facts or encoded or found.scrubbed or found.dropped):
            return None
        stats.spans_with_facts += 1
        if splice and encoded and not (producer_facts or found.scrubbed or found.dropped):
            return encoded  # the kernel's facts alone: spliced into the span's encoding
        write_facts(span, facts, found.scrubbed, found.dropped, producer_facts, encoded)
        return None

    def _redact_event(
        self, event: trace_pb2.Span.Event, keep: _ContentPolicy, found: _Findings,
        stats: RedactionStats, key: TenantKey,
    ) -> int:  # fmt: skip
        """Scrub one event's name, remove, withhold or scrub its attributes; returns how
        many attributes were removed."""
        is_content = event.name in genai.CONTENT_EVENTS
        event.name = self._scrub_field(event.name, found.scrubbed, "event.name", stats)
        prefix = f"event:{event.name}:"
        event_attributes = event.attributes
        if is_content and not keep.messages:
            if self.facts is not None:
                for kv in event_attributes:
                    self._note_dropped(kv, found, prefix)
            removed = _delete(event_attributes, range(len(event_attributes)))
        elif is_content:  # captured messages: every attribute is content, kept
            removed = 0
            for kv in event_attributes:
                self._keep_content(kv, found.scrubbed, prefix, stats, key)
        else:
            content = self._scan(event_attributes, None, found.scrubbed, prefix, stats, key)[0]
            removed = self._settle(event_attributes, content, keep, found, prefix, stats, key)
        return removed

    def _scan(
        self,
        attributes: Iterable[KeyValue],
        context: dict[str, Any] | None,
        scrubbed: PiiRecord,
        prefix: str,
        stats: RedactionStats,
        key: TenantKey,
        read: list[tuple[str, Any]] | None = None,
        messages: bool = False,
    ) -> tuple[list[int], bool, list[int]]:
        """Forward (scrubbed or withheld) the values that are not content; return the
        content indexes, whether a producer set any fact, and the indexes of the
        `pathgrade.confirmed_action` attributes (content too). Fills `context` with the raw
        values of the context keys, and `read` with the content's (key, raw value) pairs in
        index order, when given; with `messages` (an inference record's), input and output
        messages as `MessagesText` where the OTLP reader writes them."""
        content = []
        confirmed = []
        producer_facts = False
        forwarding = self.forwarding
        for index, kv in enumerate(attributes):
            name = kv.key
            verdict = forwarding(name)
            if verdict == _CONTENT:
                content.append(index)
                if name == genai.PG_CONFIRMED_ACTION:
                    confirmed.append(index)
                if read is not None:
                    value = kv.value
                    written = read_messages(value) if messages and name in _MESSAGES else None
                    read.append((name, written or structured_value(value)))
                continue
            if verdict == _FACT:
                producer_facts = True
            elif verdict == _CONTEXT and context is not None:
                context[name] = any_value(kv.value)
            self._forward(kv, name, verdict, scrubbed, prefix, stats, key)
        return content, producer_facts, confirmed

    def _forward(
        self, kv: KeyValue, name: str, verdict: int, record: PiiRecord, prefix: str,
        stats: RedactionStats, key: TenantKey,
    ) -> None:  # fmt: skip
        """Forward one attribute that is not content by its verdict: scrubbed (allowed),
        as a fingerprint where scrubbing would change it (identifier), withheld, or with
        its key withheld too; notes what was found under `prefix` + its key as forwarded."""
        value = kv.value
        if verdict in (_ALLOWED, _CONTEXT):
            counts = self._scrub_value(value)
        elif verdict == _FACT:
            counts = self._scrub_fact(value)
        elif verdict == _IDENTIFIER:
            counts = self._scrub_identifier(value, key)
        elif verdict == _MEMBERS and _keep_members(value, ALLOWED_MEMBERS[name]):
            counts = self._scrub_value(value)
        else:
            if verdict == _KEY_WITHHELD:
                name = kv.key = self._withheld_key(name, key, record, prefix, stats)
            counts = self._withhold(value, key, stats)
        if counts:
            stats.scrubbed(record, prefix + name, counts)

    def _withheld_key(
        self, name: str, key: TenantKey, record: PiiRecord, prefix: str, stats: RedactionStats
    ) -> str:
        """The mark an attribute key travels as (noting what it held under `prefix`
        "key")."""
        counts = self.scanner.find(name)
        if counts:
            stats.scrubbed(record, prefix + "key", counts)
        stats.withheld_values += 1
        return withheld_mark(KEY_TYPE, key.fingerprint(name), counts)

    def _withhold(self, value: AnyValue, key: TenantKey, stats: RedactionStats) -> Counts:
        """Replace `value` by its mark (a boolean and an empty string stay: they hold no
        text); returns the personal data found in it."""
        text = value.string_value
        if text:
            counts = self.scanner.find(text)
            value.string_value = withheld_mark("string", key.fingerprint(text), counts)
            stats.withheld_values += 1
            return counts
        kind = value.WhichOneof("value")
        if kind is None or kind == "bool_value" or kind == "string_value":
            return _NOTHING
        counts = {}
        self._find_in(value, counts)
        value_type = kind.removesuffix("_value")
        value.string_value = withheld_mark(value_type, key.fingerprint(_plain(value)), counts)
        stats.withheld_values += 1
        return counts

    def _withheld_text(
        self, text: str, key: TenantKey, record: PiiRecord, field: str, stats: RedactionStats
    ) -> str:
        """The mark a string field that is not allowed travels as (noting what it held)."""
        counts = self.scanner.find(text)
        if counts:
            stats.scrubbed(record, field, counts)
        stats.withheld_values += 1
        return withheld_mark("string", key.fingerprint(text), counts)

    def _scrub_identifier(self, value: AnyValue, key: TenantKey) -> Counts:
        """Keep an identifier as it is when scrubbing would not change it, else forward its
        fingerprint (a value of the same text always gets the same one)."""
        text = value.string_value
        if text:
            counts = self.scanner.scrub(text)[1]
            if counts:
                value.string_value = key.fingerprint(text)
            return counts
        kind = value.WhichOneof("value")
        if kind == "int_value" or kind == "double_value":
            number = getattr(value, kind)
            if _MIN_CARD <= abs(number) < _MAX_CARD and card_number(number):
                value.string_value = key.fingerprint(number)
                return {CARD: 1}
            return _NOTHING
        return self._scrub_value(value)

    def _scrub_ids(
        self, holder: Any, fields: tuple[str, ...], key: TenantKey, record: PiiRecord,
        prefix: str, stats: RedactionStats,
    ) -> None:  # fmt: skip
        """Replace each of the trace or span ids of `holder` (a span or a link) that is a
        card written into an id (`id_holds_card`) by as many bytes of its fingerprint."""
        for id_field in fields:
            raw = getattr(holder, id_field)
            text = raw.hex()
            if not id_holds_card(text):
                continue
            digest = key.fingerprint(text).partition(":")[2]
            setattr(holder, id_field, bytes.fromhex(digest)[: len(raw)])
            stats.scrubbed(record, prefix + id_field, {CARD: 1})

    def _settle(
        self,
        attributes: MutableSequence[KeyValue],
        content: list[int],
        keep: _ContentPolicy,
        found: _Findings,
        prefix: str,
        stats: RedactionStats,
        key: TenantKey,
        trace_id: bytes = b"",
        read: list[tuple[str, Any]] | None = None,
        known_pii: Mapping[str, Counts | None] | None = None,
    ) -> int:
        """Scrub the kept content values (withholding a key that does not look like one),
        delete the others; returns how many were deleted. `read`: the content's (key,
        Python value) pairs (in `content`'s order) when already read; `known_pii`: the
        personal data the fact kernel found in the content values (by key, keys with any;
        None for a value it left to the scanner here)."""
        unkept = []
        for position, index in enumerate(content):
            kv = attributes[index]
            if keep.keeps_content(kv.key):
                self._keep_content(kv, found.scrubbed, prefix, stats, key)
            else:
                unkept.append(index)
                if self.facts is None:
                    continue
                if known_pii is None or (kv.key in known_pii and known_pii[kv.key] is None):
                    known = read[position][1] if read else None
                    self._note_dropped(kv, found, prefix, trace_id, known)
                elif kv.key in known_pii:
                    _note(found.dropped, prefix + kv.key, known_pii[kv.key])
        return _delete(attributes, unkept)

    def _keep_content(
        self, kv: KeyValue, record: PiiRecord, prefix: str, stats: RedactionStats,
        key: TenantKey,
    ) -> None:  # fmt: skip
        """Forward captured content scrubbed (its key withheld when it does not look like
        one: a content key known by its prefix may carry anything after it)."""
        name = kv.key
        if not self._key_is_clean(name):
            name = kv.key = self._withheld_key(name, key, record, prefix, stats)
        counts = self._scrub_value(kv.value)
        if counts:
            stats.scrubbed(record, prefix + name, counts)

    def _note_dropped(
        self, kv: KeyValue, found: _Findings, prefix: str, trace_id: bytes = b"",
        known: Any = None,
    ) -> None:  # fmt: skip
        """Note the personal data in an attribute about to be dropped (`known`: its value,
        when already read). A structured value is read as its JSON text, as the same
        messages on a span are; a message array that grows from one model call of the trace
        to the next is read in its new part."""
        if isinstance(known, list | dict):  # a structured value (a record's messages): its
            known = json.dumps(known, ensure_ascii=False, default=str)  # JSON, as on a span
        text = known if isinstance(known, str) else kv.value.string_value
        if len(text) > _MIN_GROWING_CHARS and text.startswith("["):
            counts = self._dropped_arrays((trace_id, prefix + kv.key), text)
        elif text:
            counts = self.scanner.find(text)
        else:
            counts = {}
            self._find_in(kv.value, counts)
        if counts:
            _note(found.dropped, prefix + kv.key, counts)

    def _policy(
        self, context: dict[str, Any], attributes: MutableSequence[KeyValue], confirmed: list[int]
    ) -> _ContentPolicy:
        """What the span may keep, from its operation / kind / tool-name attributes and its
        confirmed actions (`confirmed`: their indexes)."""
        tool_captured = self._all_tools or _tool_name(context) in self._captured_tools
        confirmed_captured = self._all_tools or any(
            _confirmed_tool(attributes[i].value) in self._captured_tools for i in confirmed
        )
        key = (_is_tool_span(context), tool_captured, confirmed_captured)
        policy = self._policies.get(key)
        if policy is None:
            config = self.config
            policy = self._policies[key] = _ContentPolicy(
                *key[:2], config.capture_messages, config.capture_identity, confirmed_captured
            )
        return policy

    def _forward_list(
        self, attributes: Iterable[KeyValue], record: PiiRecord, prefix: str,
        stats: RedactionStats, key: TenantKey,
    ) -> None:  # fmt: skip
        """Forward every attribute of a resource, scope or link by its key's verdict
        (content there is withheld: it is neither read for facts nor captured), noting
        findings under `prefix` + key."""
        forwarding = self.forwarding
        for kv in attributes:
            name = kv.key
            verdict = forwarding(name)
            if verdict == _CONTENT:
                verdict = _WITHHELD if self._key_is_clean(name) else _KEY_WITHHELD
            self._forward(kv, name, verdict, record, prefix, stats, key)

    def _scrub_field(self, text: str, record: PiiRecord, field: str, stats: RedactionStats) -> str:
        """One string field of the span, scope or resource, scrubbed."""
        if not text:
            return text
        clean, counts = self.scanner.scrub(text)
        if counts:
            stats.scrubbed(record, field, counts)
        return clean

    def _scrub_value(self, value: AnyValue) -> Counts:
        """Scrub one value in place (descending into arrays and key-value lists); returns
        what it found."""
        text = value.string_value  # most values: a non-empty string (no oneof lookup)
        if text:
            clean, counts = self.scanner.scrub(text)
            if counts:
                value.string_value = clean
            return counts
        kind = value.WhichOneof("value")
        if kind == "int_value" or kind == "double_value":
            number = getattr(value, kind)
            if _MIN_CARD <= abs(number) < _MAX_CARD and card_number(number):
                value.string_value = CARD_MARK
                return {CARD: 1}
            return _NOTHING
        if kind == "bytes_value":
            text = value.bytes_value.decode("utf-8", "replace")
            clean, counts = self.scanner.scrub(text)
            if counts:
                value.bytes_value = clean.encode()
            return counts
        total: Counts = {}
        if kind == "array_value":
            for item in value.array_value.values:
                add_counts(total, self._scrub_value(item))
        elif kind == "kvlist_value":
            for kv in value.kvlist_value.values:
                clean, counts = self.scanner.scrub(kv.key)
                if counts:
                    kv.key = clean
                    add_counts(total, counts)
                add_counts(total, self._scrub_value(kv.value))
        return total

    def _find_in(self, value: AnyValue, total: Counts) -> None:
        """Add the personal data in a value about to be dropped to `total`."""
        kind = value.WhichOneof("value")
        if kind == "string_value":
            add_counts(total, self.scanner.scrub(value.string_value)[1])
        elif kind == "bytes_value":
            add_counts(total, self.scanner.find(value.bytes_value.decode("utf-8", "replace")))
        elif kind == "int_value" or kind == "double_value":
            number = getattr(value, kind)
            if _MIN_CARD <= abs(number) < _MAX_CARD and card_number(number):
                add_counts(total, {CARD: 1})
        elif kind == "array_value":
            for item in value.array_value.values:
                self._find_in(item, total)
        elif kind == "kvlist_value":
            for kv in value.kvlist_value.values:
                self._find_in(kv.value, total)

    def _scrub_fact(self, value: AnyValue) -> Counts:
        """Scrub a fact a producer set (the collector's own are clean by construction):
        every string but its fingerprints, whose hex can look like a card's digits."""
        kind = value.WhichOneof("value")
        if kind == "array_value":
            total: Counts = {}
            for item in value.array_value.values:
                if not is_fingerprint(item.string_value):
                    add_counts(total, self._scrub_value(item))
            return total
        if kind != "string_value" or is_fingerprint(value.string_value):
            return _NOTHING
        parsed = parse_json(value.string_value)
        if not isinstance(parsed, dict | list):
            return self._scrub_value(value)
        counts: Counts = {}
        clean = _scrub_json(parsed, self.scanner, counts)
        if counts:
            value.string_value = json.dumps(clean, ensure_ascii=False)
        return counts


@dataclass(frozen=True, slots=True)
class _ContentPolicy:
    """Decides, for one span, whether a content attribute key is kept."""

    is_tool_span: bool
    tool_captured: bool
    messages: bool
    identity: bool
    confirmed: bool

    def keeps_content(self, key: str) -> bool:
        """True when this span may keep the content attribute `key` (a key
        `genai.is_content_key` holds for)."""
        if key in genai.TOOL_CONTENT_KEYS or (self.is_tool_span and key in _TOOL_OR_MESSAGE_KEYS):
            return self.tool_captured
        if key in genai.IDENTITY_KEY_SET:
            return self.identity
        if key == genai.PG_CONFIRMED_ACTION:
            return self.confirmed
        return self.messages


def _random_secret() -> FactSecret:
    """A secret of this process's own, for a redactor given none (tests, tools): its
    fingerprints are keyed, never comparable with another process's."""
    return FactSecret(secrets.token_bytes(SECRET_BYTES))


def _plain(value: AnyValue) -> Any:
    """An AnyValue as the plain value its fingerprint is of: bytes as their hex text."""
    which = value.WhichOneof("value")
    if which == "bytes_value":
        return value.bytes_value.hex()
    if which == "array_value":
        return [_plain(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


def _shared_scanner(facts: FactMaker | None, patterns: list[str]) -> PiiScanner:
    """The fact maker's scanner when it finds the same patterns (the strings facts and
    scrubbing both read are then scanned, and remembered, once), else a scanner of ours."""
    if facts is not None and [p.pattern for p in facts.scanner.extra_patterns] == patterns:
        return facts.scanner
    return PiiScanner(patterns)


def _added(earlier: Counts, later: Counts) -> Counts:
    """Counts of two texts as of one."""
    total = dict(earlier)
    add_counts(total, later)
    return total


def _scrub_json(value: Any, scanner: PiiScanner, counts: Counts) -> Any:
    """A parsed JSON value with its strings (keys too) scrubbed, fingerprints kept."""
    if isinstance(value, str):
        if is_fingerprint(value):
            return value
        clean, found = scanner.scrub(value)
        add_counts(counts, found)
        return clean
    if isinstance(value, list):
        return [_scrub_json(item, scanner, counts) for item in value]
    if isinstance(value, dict):
        return {_scrub_json(k, scanner, counts): _scrub_json(v, scanner, counts)
                for k, v in value.items()}  # fmt: skip
    return value


def _keep_members(value: AnyValue, members: frozenset[str]) -> bool:
    """Reduce a JSON object text in `value` to its `members` (texts, numbers, booleans and
    lists of them); False, leaving it as it is, when it holds no such object."""
    parsed = parse_json(value.string_value)
    if not isinstance(parsed, dict):
        return False
    kept = {k: v for k, v in parsed.items() if k in members and _structural(v)}
    value.string_value = json.dumps(kept, sort_keys=True)
    return True


def _structural(value: Any) -> bool:
    """A text, number, boolean, or a list of them."""
    if isinstance(value, list):
        return all(isinstance(item, str | int | float) for item in value)
    return isinstance(value, str | int | float)


def _raw_event_name(attributes: Iterable[KeyValue]) -> str:
    """The event name an SDK without the record's own field wrote as an attribute."""
    for kv in attributes:
        if kv.key == EVENT_NAME_ATTRIBUTE:
            return kv.value.string_value
    return ""


def _event_content(span: trace_pb2.Span, context: dict[str, Any]) -> dict[str, str]:
    """The content the span's message events hold, as GenAI attributes
    (`content.event_content`), for its facts."""
    operation = str(context.get(genai.OPERATION_NAME) or "")
    events = ((e.name, {a.key: any_value(a.value) for a in e.attributes}) for e in span.events)
    return event_content(operation, events)


def _confirmed_tool(value: AnyValue) -> str:
    """The tool named by a `pathgrade.confirmed_action` value, "" when it names none."""
    try:
        parsed = json.loads(value.string_value) if value.string_value else None
    except ValueError:
        return ""
    name = parsed.get("name") if isinstance(parsed, dict) else None
    return name if isinstance(name, str) else ""


def _kept_keys(config: RedactionConfig) -> frozenset[str] | None:
    """The content keys whose values `config` may keep, when it captures tools or identity
    but not messages: a span holding none of them loses all its content, as when nothing is
    captured (so the fact kernel may write it whole). None when nothing is captured or
    messages are (any content key may then be kept)."""
    if config.capture_messages:
        return None
    kept: frozenset[str] = frozenset()
    if config.capture_tools:
        kept |= genai.TOOL_CONTENT_KEYS | _TOOL_OR_MESSAGE_KEYS | {genai.PG_CONFIRMED_ACTION}
    if config.capture_identity:
        kept |= genai.IDENTITY_KEY_SET
    return kept or None


def _is_tool_span(context: dict[str, Any]) -> bool:
    """True for a tool execution span in GenAI, OpenInference or OpenLLMetry conventions."""
    return (
        context.get(genai.OPERATION_NAME) == genai.OP_EXECUTE_TOOL
        or context.get(genai.OI_SPAN_KIND) == genai.OI_SPAN_KIND_TOOL
        or context.get(genai.TL_SPAN_KIND) == genai.TL_SPAN_KIND_TOOL
    )


def _tool_name(context: dict[str, Any]) -> str:
    """The span's tool name: GenAI, then OpenInference, then a traceloop tool span's entity."""
    traceloop_name = (
        context.get(genai.TL_ENTITY_NAME, "")
        if context.get(genai.TL_SPAN_KIND) == genai.TL_SPAN_KIND_TOOL
        else ""
    )
    name = context.get(genai.TOOL_NAME) or context.get(genai.OI_TOOL_NAME) or traceloop_name
    return name if isinstance(name, str) else ""


def _delete(attributes: MutableSequence[KeyValue], indexes: Iterable[int]) -> int:
    """Delete the attributes at ascending `indexes`; returns how many were deleted."""
    ordered = list(indexes)
    for index in reversed(ordered):
        del attributes[index]
    return len(ordered)
