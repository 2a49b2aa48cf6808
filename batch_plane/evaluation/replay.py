"""Stored traces back onto the wire: `spans` rows -> canonical spans -> OTLP TracesData,
re-published to `pathgrade.spans` so new detectors and scorers run over old traffic.

The inverse of `pathgrade.batch_plane.store.span_rows`. What does not survive the round trip:

- Attribute values are stored as text (`span_rows.attribute_text`). They come back as
  strings, except the keys whose value also lives in a typed column (token counts, the
  replay index), which come back as integers. A boolean, float, array, map or bytes
  attribute therefore comes back as its text; re-stored, it gives the same text, so the
  `spans` row is unchanged, but a consumer reading the OTLP value sees a string.
- Resource attributes, dropped attribute/event/link counts and span flags are not stored
  except as listed; resource attributes come back as text like the span attributes.
- What the collector redacted stays redacted.

Replay is idempotent in the store: span identity (tenant, trace id, span id) and the
original receive time are unchanged, so the ReplacingMergeTree keeps one row per span.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import (
    ResourceSpans,
    ScopeSpans,
    Status,
    TracesData,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from pathgrade.batch_plane.store.trace_rows import load_traces
from pathgrade.schemas import genai
from pathgrade.schemas.model import SPAN_KINDS, STATUS_CODES, Span, Trace
from pathgrade.schemas.store import Store
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER

Progress = Callable[[int, int], None]

INTEGER_ATTRIBUTES = frozenset(
    {
        genai.USAGE_INPUT_TOKENS,
        genai.USAGE_OUTPUT_TOKENS,
        genai.USAGE_PROMPT_TOKENS_DEPRECATED,
        genai.USAGE_COMPLETION_TOKENS_DEPRECATED,
        genai.TL_LLM_USAGE_PROMPT_TOKENS,
        genai.TL_LLM_USAGE_COMPLETION_TOKENS,
        genai.TL_LLM_USAGE_TOTAL_TOKENS,
        genai.PG_REPLAY_INDEX,
    }
)
"""Attribute keys whose value also fills a typed integer column: replayed as integers."""
_INTEGER_TEXT = re.compile(r"-?\d+")
ACK_TIMEOUT_S = 30.0


def typed_value(key: str, text: Any) -> Any:
    """Stored attribute text back to a value: an integer where a typed column allows it."""
    if key in INTEGER_ATTRIBUTES and isinstance(text, str) and _INTEGER_TEXT.fullmatch(text):
        return int(text)
    return text


def any_value(key: str, text: Any) -> AnyValue:
    """A stored attribute as an OTLP AnyValue: int_value for integer keys, else text."""
    value = typed_value(key, text)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    return AnyValue(string_value=str(value))


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(key, value)) for key, value in attributes.items()]


def otlp_span(span: Span) -> OtlpSpan:
    """One canonical span as an OTLP span."""
    return OtlpSpan(
        trace_id=bytes.fromhex(span.trace_id),
        span_id=bytes.fromhex(span.span_id),
        parent_span_id=bytes.fromhex(span.parent_span_id),
        trace_state=span.trace_state,
        name=span.name,
        kind=_index(SPAN_KINDS, span.kind),  # type: ignore[arg-type]
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=key_values(span.attributes),
        events=[
            OtlpSpan.Event(
                time_unix_nano=e.time_ns, name=e.name, attributes=key_values(e.attributes)
            )
            for e in span.events
        ],
        links=[
            OtlpSpan.Link(
                trace_id=bytes.fromhex(link.trace_id),
                span_id=bytes.fromhex(link.span_id),
                trace_state=link.trace_state,
                attributes=key_values(link.attributes),
            )
            for link in span.links
        ],
        status=Status(code=_index(STATUS_CODES, span.status_code), message=span.status_message),  # type: ignore[arg-type]
    )


def _index(names: tuple[str, ...], name: str) -> int:
    return names.index(name) if name in names else 0


def traces_data(trace: Trace) -> TracesData:
    """A trace as OTLP TracesData: one ResourceSpans per resource, one ScopeSpans per scope."""
    resources: dict[tuple[tuple[str, Any], ...], dict[tuple[str, str], list[Span]]] = {}
    for span in trace.spans:
        resource_key = tuple(sorted(span.resource_attributes.items()))
        scopes = resources.setdefault(resource_key, {})
        scopes.setdefault((span.scope_name, span.scope_version), []).append(span)
    return TracesData(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(dict(resource_key))),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name=name, version=version),
                        spans=[otlp_span(span) for span in spans],
                    )
                    for (name, version), spans in scopes.items()
                ],
            )
            for resource_key, scopes in resources.items()
        ]
    )


class Producer(Protocol):
    """What replay needs of a kafka-python KafkaProducer."""

    def send(
        self, topic: str, value: bytes, key: bytes, headers: list[tuple[str, bytes]]
    ) -> Any: ...
    def flush(self, timeout: float | None = None) -> None: ...


@dataclass
class ReplaySummary:
    """What a replay re-published."""

    traces: int = 0
    spans: int = 0
    elapsed_s: float = 0.0


def publish_trace(producer: Producer, trace: Trace, topic: str = SPANS_TOPIC) -> Any:
    """Send one trace as a `pathgrade.spans` message (key, tenant and receive-time headers)."""
    received_at = max(span.received_at_ns for span in trace.spans)
    return producer.send(
        topic,
        value=traces_data(trace).SerializeToString(),
        key=trace.trace_id.encode(),
        headers=[
            (TENANT_HEADER, trace.tenant.encode()),
            (RECEIVED_AT_HEADER, str(received_at).encode()),
        ],
    )


def replay_traces(
    store: Store,
    producer: Producer,
    trace_ids: Sequence[str],
    *,
    rate_per_s: float | None = None,
    batch: int = 100,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ReplaySummary:
    """Re-publish the stored traces `trace_ids`, at most `rate_per_s` traces a second,
    reading the store `batch` traces at a time; waits until Kafka acknowledged them all."""
    if rate_per_s is not None and rate_per_s <= 0:
        raise ValueError(f"rate: must be positive, got {rate_per_s}")
    summary = ReplaySummary()
    pending = []
    started = clock()
    for chunk in _chunks(trace_ids, batch):
        for trace in load_traces(store, chunk):
            if rate_per_s is not None:
                due = started + summary.traces / rate_per_s
                if (wait := due - clock()) > 0:
                    sleep(wait)
            pending.append(publish_trace(producer, trace))
            summary.traces += 1
            summary.spans += len(trace.spans)
            if progress is not None:
                progress(summary.traces, len(trace_ids))
    producer.flush()
    for future in pending:
        future.get(timeout=ACK_TIMEOUT_S)  # raises the Kafka error of a failed send
    summary.elapsed_s = clock() - started
    return summary


def _chunks(values: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
