"""The canonical span and trace: what every consumer of `pathgrade.spans` sees.

Plain slotted dataclasses, not pydantic: they are built on the hot path for every span.
Attribute values keep their OTLP types (str, bool, int, float, bytes, list, dict).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from pathgrade.schemas.facts import SpanFacts, merged_facts, span_facts

Attributes = dict[str, Any]
SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK = 0x100
"""OTLP `Span.flags`: set when bit 9 says whether the span's parent is remote."""
SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK = 0x200
"""OTLP `Span.flags`: the span's parent lives in another process (W3C `traceparent` in)."""
MAX_TIME_NS = 2**63 - 1
"""The latest time the store holds, in ns since the epoch: its DateTime64(9) and Int64 time
columns are signed 64-bit (2262-04-11T23:47:16Z)."""
SPAN_KINDS = ("Unspecified", "Internal", "Server", "Client", "Producer", "Consumer")
"""`Span.kind`'s values (as the OTel Collector's `otel_traces` table writes them), in the
order of OTLP's `Span.SpanKind`: a kind's number is its index."""
STATUS_CODES = ("Unset", "Ok", "Error")
"""`Span.status_code`'s values, in the order of OTLP's `Status.StatusCode`."""


@dataclass(slots=True)
class GenAIFields:
    """GenAI semantic-convention view of one span, whatever convention it was written in."""

    operation: str = ""  # chat, execute_tool, invoke_agent, create_agent, embeddings, ...
    provider_name: str = ""
    agent_name: str = ""
    agent_id: str = ""
    tool_name: str = ""
    tool_call_id: str = ""
    tool_type: str = ""
    tool_arguments: str = ""  # JSON text when captured, "" otherwise
    tool_result: str = ""  # text or JSON text when captured, "" otherwise
    conversation_id: str = ""
    request_model: str = ""
    response_model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    error_type: str = ""
    input_messages: str = ""  # JSON text of the input messages when captured
    output_messages: str = ""  # JSON text of the output messages when captured
    finish_reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class EvalContext:
    """pathgrade's own evaluation context (`pathgrade.*` attributes of the root span)."""

    dataset_item_id: str = ""
    run_id: str = ""
    replay_index: int | None = None
    variant_id: str = ""
    suite_version: str = ""


@dataclass(slots=True)
class SpanEvent:
    time_ns: int
    name: str
    attributes: Attributes


@dataclass(slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    trace_state: str
    attributes: Attributes


@dataclass(slots=True)
class LogRecord:
    """One OTLP log record in canonical form: a GenAI event when it names one (`event_name`,
    the record's own field, else its `event.name` attribute as older SDKs write it). Ids are
    lowercase hex ("" when the record carries none); times are ns since the epoch (`time_ns`
    0 when the producer set only the observed time). `body` keeps its OTLP type (None when
    absent); attribute values keep theirs, as a span's do."""

    tenant: str
    trace_id: str
    span_id: str
    time_ns: int
    observed_ns: int
    event_name: str = ""
    severity_number: int = 0
    severity_text: str = ""
    body: Any = None
    attributes: Attributes = field(default_factory=dict)
    service_name: str = ""
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    flags: int = 0
    received_at_ns: int = 0
    _facts: SpanFacts | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def at_ns(self) -> int:
        """When the event happened: its time, else when it was observed."""
        return self.time_ns or self.observed_ns

    @property
    def facts(self) -> SpanFacts:
        """The record's `pathgrade.facts.*` attributes, parsed on first use."""
        if self._facts is None:
            self._facts = span_facts(self.attributes)
        return self._facts


@dataclass(slots=True)
class Span:
    """One span in canonical form. Ids are lowercase hex; times are ns since the epoch."""

    tenant: str
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str  # Unspecified, Internal, Server, Client, Producer, Consumer (as otel_traces)
    start_ns: int
    end_ns: int
    service_name: str = ""
    trace_state: str = ""
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    attributes: Attributes = field(default_factory=dict)
    status_code: str = "Unset"  # Unset, Ok, Error (as otel_traces)
    status_message: str = ""
    events: list[SpanEvent] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)
    genai: GenAIFields = field(default_factory=GenAIFields)
    eval: EvalContext = field(default_factory=EvalContext)
    received_at_ns: int = 0
    flags: int = 0  # OTLP Span.flags: W3C trace flags, and whether the parent is remote
    records: list[LogRecord] = field(default_factory=list, init=False)
    """The log records tied to this span (its GenAI events as records), in time order:
    joined by the consumer (`content.events.join_records`), never decoded with the span."""
    _facts: SpanFacts | None = field(default=None, init=False, repr=False, compare=False)
    _content_from_records: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def is_root(self) -> bool:
        return not self.parent_span_id

    @property
    def parent_is_remote(self) -> bool | None:
        """Whether the parent lives in another process (OTLP span flags); None when the
        exporter did not say (flag bit 8 clear) or the span has no parent."""
        if not self.parent_span_id or not self.flags & SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK:
            return None
        return bool(self.flags & SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)

    @property
    def facts(self) -> SpanFacts:
        """The span's `pathgrade.facts.*` attributes and those of its records (a fact is a
        fact of the span whatever carried the content: `schemas.facts.merged_facts`),
        parsed on first use (`schemas.facts`: consumers that never read them pay nothing)."""
        if self._facts is None:
            own = span_facts(self.attributes)
            records = self.records
            self._facts = merged_facts(own, [r.facts for r in records]) if records else own
        return self._facts


_START_ORDER = attrgetter("start_ns", "span_id")
"""A trace's span order: start time, then span id (a C-level key, once per span)."""
_NOT_FOUND_YET: Any = object()
"""`Trace._root` before the root was looked for (None is a trace without a root)."""


@dataclass(slots=True)
class Trace:
    """The spans of one trace of one tenant, in start-time order, or of one agent turn of
    it (`content.agent_turns`): then `top_span_id` names the turn's top span, `spans` are
    the turn's own and `context` the spans enclosing it (server spans, middleware, a
    session's span), nearest first; the first `own_context` of those enclose this turn
    only. Treat `spans` as read-only once the trace is built: its root is found once, on
    first use."""

    tenant: str
    trace_id: str
    spans: list[Span]
    context: list[Span] = field(default_factory=list)
    top_span_id: str = ""
    own_context: int = 0
    _root: Span | None = field(default=_NOT_FOUND_YET, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.spans.sort(key=_START_ORDER)

    @property
    def root(self) -> Span | None:
        """The turn's top span; for a whole trace, the root span (no parent, or a parent
        not in the trace), earliest first."""
        if self._root is _NOT_FOUND_YET:
            self._root = self._find_root()
        return self._root

    def own_spans(self) -> list[Span]:
        """The top span (`root`), then the enclosing spans that enclose this turn only:
        where a turn says what it is (its kind, a confirmation, its answer)."""
        top = self.root
        return ([top] if top else []) + self.context[: self.own_context]

    def session_spans(self) -> list[Span]:
        """The top span, every enclosing span (nearest first), then the turn's spans: where
        the session a turn belongs to is named (who the user is, the conversation)."""
        top = self.root
        return ([top] if top else []) + self.context + self.spans

    @property
    def context_pending(self) -> bool:
        """Whether the outermost span that arrived of a turn (its farthest context span,
        else its top) hangs from a span the exporter says is local that has not arrived:
        a session or request span that ends after the turn, where a decision, a
        confirmation or the identity may yet be recorded. False for a whole trace and
        without flags (a stored trace keeps none)."""
        if not self.top_span_id:
            return False
        boundary = self.context[-1] if self.context else self.root
        return (
            boundary is not None
            and bool(boundary.parent_span_id)
            and (boundary.parent_is_remote is False)
        )

    def _find_root(self) -> Span | None:
        if self.top_span_id:
            return next((s for s in self.spans if s.span_id == self.top_span_id), None)
        ids = {s.span_id for s in self.spans}
        for span in self.spans:
            if not span.parent_span_id or span.parent_span_id not in ids:
                return span
        return None

    def children(self, span_id: str) -> list[Span]:
        return [s for s in self.spans if s.parent_span_id == span_id]

    def by_operation(self, operation: str) -> Iterator[Span]:
        return (s for s in self.spans if s.genai.operation == operation)
