"""The collector's facts: the deployment's fact secret, computing one span's facts from its
raw values (`content.facts_producer`), and writing facts onto an OTLP span.

The same facts come from two places. The fact kernel (`_facts_kernel`, a C extension built
at install) reads a whole export request's bytes once and answers for every span it can
decide, from the definitions handed to it here (`kernel_config`); a span it leaves to
Python (flattened messages, values that are not text, unusual JSON), a request that was
not read from bytes, and an install without the extension get `FactMaker.facts`. A logs
request's records are read by the kernel from their raw content's Python values, as a span
of those attributes would be read (`FactMaker.records_facts`). Both give the same attributes
(tests/unit/collector/test_facts_kernel.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from pathgrade.collector.forwarding import Forwarding
from pathgrade.content.conventions import NOT_REBUILT, ContentView, content_view
from pathgrade.content.event_content import MESSAGE_EVENTS
from pathgrade.content.events import event_messages, messages_json
from pathgrade.content.facts_producer import (
    UNTRUSTED_MARKERS,
    compute_facts,
    instructions_in_messages,
    joined_hits,
    pii_record_text,
)
from pathgrade.content.fingerprints import KEY_FILE_NAME, FactSecret
from pathgrade.content.messages import NAMED_PART_TYPES, UNTRUSTED_PART_TYPES, GrowingArrays
from pathgrade.content.pii import (
    CARD_MAX_DIGITS,
    CARD_MIN_DIGITS,
    CARD_RUN_MAP,
    ENCODED_HEX_CHARS,
    ENCODED_MAP,
    ENCODED_MIN_CHARS,
    OBFUSCATION_OPENERS,
    OBFUSCATION_WORDS,
    PAYMENT_INDUSTRIES,
    SPELT_DOT,
    TRIGGERS,
    PiiScanner,
)
from pathgrade.content.predicates import ASKS, CLAIMS, INSTRUCTIONS, RequestPatterns
from pathgrade.content.withheld import WITHHELD_PREFIX, WITHHELD_SUFFIX
from pathgrade.schemas import genai
from pathgrade.schemas import genai_mapping as mapping
from pathgrade.schemas.decline import Decision, Declined
from pathgrade.schemas.facts import (
    CONFIRMED,
    FACT_KEYS,
    FACTS_VERSION,
    OUTPUT,
    PII_DROPPED,
    PII_SCRUBBED,
    SESSION_FP,
    TOOL_ARGS,
    UNTRUSTED_INSTRUCTIONS,
    VERSION,
    PiiRecord,
)
from pathgrade.schemas.lexicons import SKELETON_MAX_DEPTH, SKELETON_MAX_ITEMS
from pathgrade.schemas.model import GenAIFields

try:
    from pathgrade.collector._facts_kernel import Kernel, splice_attributes
except ImportError:  # installed without a C compiler: every span's facts in Python
    Kernel = None

    def splice_attributes(span: bytes, attributes: bytes) -> bytes:
        """Never called without the kernel (it leaves no facts to splice)."""
        raise RuntimeError("the fact kernel is not built")


def load_secret(key_file: Path | None, spill_dir: Path) -> FactSecret:
    """The fact secret: from `key_file` (which must exist), else from the spill directory's
    `facts.key`, created with a fresh secret the first time. ValueError names the file."""
    if key_file is not None:
        return FactSecret.from_file(key_file)
    return FactSecret.load_or_create(spill_dir / KEY_FILE_NAME)


_NO_CONTENT: ContentView = (GenAIFields(), NOT_REBUILT)

NOT_READ = Declined("not read by the kernel (none built, or no body it reads whole)")
"""The answer for every span (or record) of a request the kernel did not read."""
DECLINED_UNREAD = Declined("message events, or more attributes than the kernel holds")
DECLINED_REPEATED = Declined("a content key twice")
DECLINED_FALLBACK = Declined("content the kernel does not read as Python does")
DECLINED_RECORD = Declined("a log record with a body, producer facts or non-text content")
DECLINED_WHOLE = Declined("a span the redactor redacts (not written whole by the kernel)")
"""A span's whole encoding the kernel declines (`WholeAnswers.encodings`)."""
KERNEL_DECLINES = (DECLINED_UNREAD, DECLINED_REPEATED, DECLINED_FALLBACK, DECLINED_RECORD)
"""Every reason the kernel declines a span or a record for (`NOT_READ` aside: no answer)."""


@dataclass(frozen=True, slots=True)
class WholeAnswers:
    """The fact kernel's answers for a request whose content values are all dropped."""

    answers: list[Any]
    """Each span's facts answer, as `FactMaker.request_facts` gives it."""
    encodings: list[Decision[bytes]]
    """Each span's encoding as the collector forwards it: its content attributes removed,
    the string values of keys that are not allowed replaced by their marks,
    `pathgrade.redacted.keys` and its facts added, everything else as it came, which
    scrubbing leaves as it is. `DECLINED_WHOLE` for a span the redactor redacts: one with events or
    links, a status message, a fact a producer set, a key that is withheld, a value to
    withhold that is not a string or holds personal data, an id whose hex may hold a card,
    or a string or number that scrubbing changes (or whose facts the kernel left to
    Python)."""
    removed: int
    """Attributes removed from the spans with an encoding."""
    with_facts: int
    """Spans with an encoding that got facts."""
    withheld: int
    """Values the spans with an encoding forward as their marks."""


class FactMaker:
    """Computes the facts of one span from its raw attribute values, per tenant. A trace's
    model calls repeat the conversation so far in their input: what was found in the
    earlier messages is remembered per trace (bounded), and only new ones are read.
    `requests`: the policy's request patterns (`pathgrade.facts.requests`); with any, the
    kernel leaves every span with input messages to Python, which matches them."""

    def __init__(
        self,
        secret: FactSecret,
        scanner: PiiScanner,
        native: bool = True,
        requests: RequestPatterns | None = None,
    ) -> None:
        self.secret = secret
        self.scanner = scanner
        self.requests = requests or None
        self._inputs = GrowingArrays(instructions_in_messages, joined_hits)
        self.kernel = (
            Kernel(kernel_config(scanner, decline_inputs=self.requests is not None))
            if native and Kernel is not None
            else None
        )
        """The fact kernel (None: the extension is not built, or `native` is False)."""

    def request_facts(
        self, body: bytes, tenant: str, drops_all: bool, kept: frozenset[str] | None = None
    ) -> list[Any] | None:
        """The kernel's answer for each span of the export request encoded as `body`, in
        request order; None when there is no kernel or it does not read this body. An
        answer is None (no facts, no personal data in content), a `Declined` (left to
        `facts`: one of `KERNEL_DECLINES`),
        bytes (encoded `Span.attributes`: the facts, the version and, when `drops_all`
        (every content value is dropped) and the span has no events, the pii.dropped
        record), or (bytes or None, {content key: {kind: count}, or None for a value the
        scanner must read}) (see collector/_facts_kernel.c). `kept`: content keys whose
        values may be kept (captured); a span holding one is answered as without
        `drops_all`."""
        if self.kernel is None:
            return None
        key = self.secret.for_tenant(tenant)
        answers: list[Any] | None = self.kernel.request(
            body, key.key, key.key_id, tenant, drops_all, False, None, 0, kept
        )
        return answers

    def request_whole(
        self, body: bytes, tenant: str, forwarding: Callable[[str], int], forwarding_id: int,
        kept: frozenset[str] | None = None,
    ) -> WholeAnswers | None:  # fmt: skip
        """`request_facts` on `drops_all` (every content value is dropped), with each span's
        whole encoding as the collector forwards it where the kernel writes it (each
        attribute key forwarded by its `forwarding` verdict, `Redactor.forwarding`; the
        kernel remembers the verdicts under `forwarding_id`, which no other forwarding may
        have); None when there is no kernel or it does not read this body. `kept`: content
        keys whose values may be kept (captured); a span holding one is answered as
        `request_facts` answers without `drops_all`, and gets no whole encoding."""
        if self.kernel is None:
            return None
        key = self.secret.for_tenant(tenant)
        answered = self.kernel.request(
            body, key.key, key.key_id, tenant, True, True, forwarding, forwarding_id, kept
        )
        return None if answered is None else WholeAnswers(*answered)

    def records_facts(
        self, contents: Sequence[tuple[bytes, Mapping[str, Any]] | None], tenant: str
    ) -> list[Any] | None:
        """The kernel's answer for each log record's raw content (`record_content`: its
        trace id and values; None for a record left to Python), read from those values
        themselves, as `request_facts` answers on `drops_all` for a span of those
        attributes: what `facts("", raw, tenant, trace_id)` gives, and the pii.dropped
        record of its content, the facts encoded as `LogRecord.attributes` entries
        (`merge_encoded`). A `Declined` for a record left to Python (`DECLINED_RECORD`:
        one holding a value that is neither text nor a list of texts too); None when there
        is no kernel."""
        if self.kernel is None:
            return None
        key = self.secret.for_tenant(tenant)
        answers: list[Any] = self.kernel.records(
            list(contents), key.key, key.key_id, tenant, DECLINED_RECORD
        )
        return answers

    def facts(
        self, span_name: str, raw: Mapping[str, Any], tenant: str, trace_id: bytes = b""
    ) -> dict[str, Any]:
        """The fact attributes of a span named `span_name` with attributes `raw` (only the
        ones facts read need be given: content, identity and the span's kind keys), of
        trace `trace_id`."""
        # Only the identity or a confirmation (a root span): no GenAI view is needed.
        needs_fields = any(k not in genai.PRIVATE_KEYS and genai.is_content_key(k) for k in raw)
        fields, rebuilt = content_view(span_name, raw) if needs_fields else _NO_CONTENT
        key = self.secret.for_tenant(tenant)
        inputs = self._inputs
        return compute_facts(
            fields, raw, key, self.scanner, lambda text: inputs((tenant, trace_id), text),
            rebuilt, self.requests,
        )  # fmt: skip


def kernel_config(scanner: PiiScanner, decline_inputs: bool = False) -> dict[str, Any]:
    """What the fact kernel reads its definitions from: the convention mapping's keys and
    tables (the final-answer tools, whose calls it leaves to Python), the lexicons (their
    anchors, and their `hits` for a text holding one), the scanner (its pre-checks'
    characters, card characters, encoded tokens' characters, and `find` / `clean` for a
    text that may hold personal data), the fact names, the facts'
    keys (a span a producer set one on is redacted in Python), the key of the count of
    removed attributes, the forwarding verdicts the kernel writes whole spans for
    (allowed, context, identifier, withheld), a withheld string's mark around its
    fingerprint, whether it declines spans with input messages (`decline_inputs`:
    request patterns are matched in Python), and the answers it declines spans with, one
    per reason (`schemas.decline`)."""
    return {
        "content_keys": genai.CONTENT_KEYS,
        "content_prefixes": genai.MESSAGE_CONTENT_PREFIXES,
        "context_keys": CONTEXT_KEYS,
        "identity_keys": genai.IDENTITY_KEYS,
        "confirmed_key": genai.PG_CONFIRMED_ACTION,
        "message_fallback_keys": mapping.MESSAGE_FALLBACK_KEYS,
        "operation_key": mapping.OPERATION_KEY,
        "operation_sources": tuple(
            (s.key, s.table, s.unknown == "lowercase", s.upper, s.unknown_value)
            for s in mapping.OPERATION_SOURCES
        ),
        "operations": genai.OPERATIONS,
        "message_events": MESSAGE_EVENTS,
        "message_operations": mapping.MESSAGE_OPERATIONS,
        "model_operations": genai.MODEL_OPERATIONS,
        "execute_tool": genai.OP_EXECUTE_TOOL,
        "tool_arguments_key": mapping.TOOL_ARGUMENTS.key,
        "tool_argument_fallback_keys": mapping.TOOL_ARGUMENTS.fallback_keys,
        "tool_result_key": mapping.TOOL_RESULT.key,
        "tool_result_fallback_keys": mapping.TOOL_RESULT.fallback_keys,
        "input_messages_key": mapping.INPUT_MESSAGES.key,
        "output_messages_key": mapping.OUTPUT_MESSAGES.key,
        "finish_reason_keys": mapping.FINISH_REASON_KEYS,
        "documents_key": genai.RETRIEVAL_DOCUMENTS,
        "untrusted_markers": UNTRUSTED_MARKERS,
        "untrusted_part_types": UNTRUSTED_PART_TYPES,
        "named_part_types": NAMED_PART_TYPES,
        "final_answer_tools": mapping.FINAL_ANSWER_TOOLS,
        "instruction_names": tuple(INSTRUCTIONS.expressions),
        "instruction_anchors": INSTRUCTIONS.anchors,
        "instruction_hits": INSTRUCTIONS.hits,
        "claim_anchors": CLAIMS.anchors,
        "claim_hits": CLAIMS.hits,
        "ask_anchors": ASKS.anchors,
        "ask_hits": ASKS.hits,
        "pii_find": scanner.find,
        "pii_clean": scanner.clean,
        "exact_pii": not scanner.extra_patterns,
        "pii_triggers": TRIGGERS.encode(),
        "obfuscation_openers": OBFUSCATION_OPENERS.encode(),
        "obfuscation_words": OBFUSCATION_WORDS,
        "spelt_dot": SPELT_DOT,
        "card_run_map": CARD_RUN_MAP,
        "card_min": CARD_MIN_DIGITS,
        "card_max": CARD_MAX_DIGITS,
        "payment_digits": "".join(sorted(PAYMENT_INDUSTRIES)).encode(),
        "encoded_map": ENCODED_MAP,
        "encoded_min": ENCODED_MIN_CHARS,
        "encoded_hex_min": ENCODED_HEX_CHARS,
        "forwarding_verdicts": (
            Forwarding.ALLOWED,
            Forwarding.CONTEXT,
            Forwarding.IDENTIFIER,
            Forwarding.WITHHELD,
        ),
        "withheld_string": (WITHHELD_PREFIX + "string:", WITHHELD_SUFFIX),
        "skeleton_max_depth": SKELETON_MAX_DEPTH,
        "skeleton_max_items": SKELETON_MAX_ITEMS,
        "fact_names": FACT_NAMES,
        "fact_keys": FACT_KEYS,
        "redacted_key": genai.PG_REDACTED_KEYS,
        "facts_version": FACTS_VERSION,
        "decline_inputs": int(decline_inputs),
        "declined_unread": DECLINED_UNREAD,
        "declined_repeated": DECLINED_REPEATED,
        "declined_fallback": DECLINED_FALLBACK,
        "declined_whole": DECLINED_WHOLE,
    }


FACT_NAMES = (
    TOOL_ARGS, SESSION_FP, CONFIRMED, UNTRUSTED_INSTRUCTIONS, OUTPUT, VERSION, PII_DROPPED,
)  # fmt: skip
"""The fact attributes the kernel writes, in the order it is handed them."""

CONTEXT_KEYS = frozenset(
    {
        genai.OPERATION_NAME, genai.OI_SPAN_KIND, genai.TL_SPAN_KIND, genai.TOOL_NAME,
        genai.OI_TOOL_NAME, genai.TL_ENTITY_NAME, genai.TL_LLM_REQUEST_TYPE,
        genai.RESPONSE_FINISH_REASONS, genai.OI_LLM_FINISH_REASON,
    }
)  # fmt: skip
"""Keys whose raw values decide a span's capture policy and feed its facts (never
content): what facts read besides content."""


def record_content(
    name: str, content: Mapping[str, Any], context: Mapping[str, Any], body: Any
) -> dict[str, Any]:
    """The raw values `FactMaker.facts` reads of a log record named `name`: its content
    attributes (`content`) and context keys, with the messages its event carries
    (`content.events.event_messages`, from those attributes or the `body`) written as a
    model call's `gen_ai.input.messages` / `gen_ai.output.messages` (operation `chat`
    unless the record names one), so a card in a choice record is an output fact of it
    as of a span; {} when it holds no content."""
    raw = {**content, **context}
    messages = event_messages(name, raw, body)
    if not messages:
        return raw if content else {}
    for key, carried in ((genai.INPUT_MESSAGES, messages.inputs),
                         (genai.OUTPUT_MESSAGES, messages.outputs)):  # fmt: skip
        if carried:
            raw[key] = messages_json(carried)
        else:
            raw.pop(key, None)
    if messages.finish_reasons:
        raw[genai.RESPONSE_FINISH_REASONS] = messages.finish_reasons
    raw.setdefault(genai.OPERATION_NAME, genai.OP_CHAT)
    return raw


def write_facts(
    span: Span | LogRecord,
    facts: Mapping[str, Any],
    scrubbed: PiiRecord,
    dropped: PiiRecord,
    producer_facts: bool = True,
    encoded: bytes | None = None,
) -> None:
    """Write the span's (or log record's) computed `facts`, or the kernel's `encoded` ones
    (attribute entries of the holder, the version included), replacing every `pathgrade.facts.*`
    attribute a producer set (the collector's are one consistent set), and the pii records
    (replacing only those), when there is anything to write at all. `producer_facts` False: the
    caller saw no fact attribute on the span, so none is looked for."""
    if not (facts or encoded or scrubbed or dropped):
        return
    attributes = span.attributes
    values = dict(facts)
    if not encoded:
        values[VERSION] = FACTS_VERSION
    if scrubbed:
        values[PII_SCRUBBED] = pii_record_text(scrubbed)
    if dropped:
        values[PII_DROPPED] = pii_record_text(dropped)
    if producer_facts:
        replaced = FACT_KEYS if facts or encoded else values.keys()
        stale = [i for i, kv in enumerate(attributes) if kv.key in replaced]
        for index in reversed(stale):
            del attributes[index]
    if encoded:  # encoded under the holder's own attributes field (`records_facts`)
        span.MergeFromString(encoded)
    for key, value in values.items():
        _set_value(attributes.add(key=key).value, value)


def _set_value(target: AnyValue, value: Any) -> None:
    """Set an AnyValue (made in place: cheaper than building and copying one) from a
    fact's value: str, bool, int, or a list of strings (an empty list is a value too:
    "checked, none")."""
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    else:
        array = target.array_value
        array.SetInParent()
        for item in value:
            array.values.add().string_value = item
