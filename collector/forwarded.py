"""What may leave the collector of one export request: its spans as forwarded.

`Redactor.forward` is the only maker of `ForwardedSpans`, and `grouping.group_by_trace`
takes nothing else: a span reaches a Kafka message only as the encoding the redaction step
wrote for it (by the fact kernel or by the Python redactor), never from the request it
came in, which may still hold the content the step removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pathgrade.collector.redact import RedactionStats


class ForwardedSpan(NamedTuple):
    """One span as it leaves: its ids (as forwarded, after any scrubbing) and its whole
    encoding (an OTLP `Span`)."""

    trace_id: bytes
    span_id: bytes
    encoding: bytes


class ForwardedScope(NamedTuple):
    """One scope of a request as it leaves: its encoded `InstrumentationScope`, its schema
    URL and its spans, in request order."""

    scope: bytes
    schema_url: str
    spans: list[ForwardedSpan]


class ForwardedResource(NamedTuple):
    """One resource of a request as it leaves: its encoded `Resource`, its schema URL and
    its scopes, in request order."""

    resource: bytes
    schema_url: str
    scopes: list[ForwardedScope]


@dataclass(frozen=True, slots=True)
class ForwardedSpans:
    """The spans of one export request as the redaction step let them out, in request
    order; the only input of grouping (`grouping.group_by_trace`)."""

    resources: list[ForwardedResource]
    stats: RedactionStats
    """What the step did (its `spans`: every span of the request, each forwarded)."""
