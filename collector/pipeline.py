"""The collector's one processing path, shared by the gRPC and HTTP receivers:
validate -> facts and redaction (per tenant) -> group by trace -> publish; for spans
(`ingest`, to `pathgrade.spans`) and log records (`ingest_logs`, to `pathgrade.logs`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.collector.counters import IngestCounters
from pathgrade.collector.grouping import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Grouped,
    TraceMessage,
    group_by_trace,
    group_logs,
)
from pathgrade.collector.publisher import KafkaPublisher
from pathgrade.collector.redact import Redactor
from pathgrade.collector.spill import OutgoingMessage
from pathgrade.collector.validate import Rejections, validate_logs_request, validate_request

MAX_NAMED_SPANS = 5
"""How many span ids (and trace ids) the error line of a message Kafka refused names."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What the receiver reports back: OTLP partial success when anything was rejected."""

    accepted_spans: int
    rejected_spans: int
    error_message: str


class IngestPipeline:
    """Turns one decoded export request of one tenant into acknowledged Kafka messages."""

    def __init__(
        self,
        redactor: Redactor,
        publisher: KafkaPublisher,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        counters: IngestCounters | None = None,
        logs_publisher: KafkaPublisher | None = None,
    ) -> None:
        self.redactor = redactor
        self.publisher = publisher
        self.logs_publisher = logs_publisher
        self.max_message_bytes = max_message_bytes
        self.counters = counters if counters is not None else IngestCounters()
        self._counters_lock = threading.Lock()

    def ingest(
        self,
        request: ExportTraceServiceRequest,
        tenant: str,
        deadline: float | None = None,
        body: bytes | None = None,
        refused: Rejections | None = None,
    ) -> IngestResult:
        """Returns by `deadline` (monotonic seconds; see KafkaPublisher.publish) once the
        good spans are in Kafka or the spill; spans that are invalid, too large to publish
        or refused by Kafka are reported, unacknowledged. `body`: the protobuf body
        `request` was parsed from, when it was (spares validation computing its size; the
        fact kernel reads it when validation kept every span). `refused`: spans the
        receiver could not decode (OTLP/JSON), reported first. Raises SpillFull."""
        rejections = refused if refused is not None else Rejections()
        rejections.extend(
            validate_request(request, encoded_bytes=len(body) if body is not None else None)
        )
        forwarded = self.redactor.forward(
            request, tenant, body if not rejections.rejected_spans else None
        )
        received_at = time.time_ns()
        grouped = group_by_trace(forwarded, self.max_message_bytes)
        rejections.extend(grouped.rejections)
        accepted = self._publish(
            self.publisher, grouped, tenant, received_at, deadline, rejections, "spans"
        )
        with self._counters_lock:
            self.counters.requests += 1
            self.counters.accepted_spans += accepted
            self.counters.rejected_spans += rejections.rejected_spans
        return IngestResult(accepted, rejections.rejected_spans, rejections.error_message)

    def ingest_logs(
        self,
        request: ExportLogsServiceRequest,
        tenant: str,
        deadline: float | None = None,
        body: bytes | None = None,
        refused: Rejections | None = None,
    ) -> IngestResult:
        """`ingest` for a logs request: its good records in Kafka (`pathgrade.logs`) or
        the spill by `deadline`, invalid ones and those too large or refused by Kafka
        reported (`IngestResult` counts records as its spans). Raises SpillFull, and
        RuntimeError when the collector has no logs publisher."""
        if self.logs_publisher is None:
            raise RuntimeError("this collector takes no logs (it has no logs publisher)")
        rejections = refused if refused is not None else Rejections()
        rejections.extend(
            validate_logs_request(request, encoded_bytes=len(body) if body is not None else None)
        )
        self.redactor.redact_logs(request, tenant)
        received_at = time.time_ns()
        partitions = self.logs_publisher.partition_count()
        grouped = group_logs(request, self.max_message_bytes, partitions)
        rejections.extend(grouped.rejections)
        accepted = self._publish(self.logs_publisher, grouped, tenant, received_at, deadline,
                                 rejections, "log records")  # fmt: skip
        with self._counters_lock:
            self.counters.log_requests += 1
            self.counters.accepted_log_records += accepted
            self.counters.rejected_log_records += rejections.rejected_spans
        return IngestResult(accepted, rejections.rejected_spans, rejections.error_message)

    def _publish(
        self, publisher: KafkaPublisher, grouped: Grouped, tenant: str, received_at: int,
        deadline: float | None, rejections: Rejections, items: str,
    ) -> int:  # fmt: skip
        """Publish `grouped`'s messages; the items of those Kafka refused are added to
        `rejections`; returns how many items were accepted."""
        messages = grouped.messages
        refused = publisher.publish(
            [OutgoingMessage(m.key, m.value, tenant, received_at) for m in messages], deadline
        )
        for index, reason in refused.items():
            rejections.add(_refused_line(messages[index], reason, items),
                           len(messages[index].spans))  # fmt: skip
        return sum(len(m.spans) for m in messages) - sum(
            len(messages[index].spans) for index in refused
        )


def _refused_line(message: TraceMessage, reason: str, items: str = "spans") -> str:
    """The error line of a message Kafka refused: (some of) its spans (or log records:
    `items`), (some of) their traces, why."""
    traces = list(dict.fromkeys(item.trace_id.hex() for item in message.spans))
    of = "trace" if len(traces) == 1 else "traces"
    return (
        f"{items} {_some(item.span_id.hex() for item in message.spans)} "
        f"of {of} {_some(traces)}: {reason}"
    )


def _some(ids: Iterable[str]) -> str:
    """The first MAX_NAMED_SPANS of `ids`, and how many more."""
    listed = list(ids)
    more = len(listed) - MAX_NAMED_SPANS
    return ", ".join(listed[:MAX_NAMED_SPANS]) + (f" and {more} more" if more > 0 else "")
