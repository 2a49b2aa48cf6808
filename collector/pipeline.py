"""The collector's one processing path, shared by the gRPC and HTTP receivers:
validate -> redact -> group by trace -> publish."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pathgrade.collector.grouping import DEFAULT_MAX_MESSAGE_BYTES, group_by_trace
from pathgrade.collector.publisher import KafkaPublisher
from pathgrade.collector.redact import Redactor
from pathgrade.collector.spill import OutgoingMessage
from pathgrade.collector.validate import validate_request


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What the receiver reports back: OTLP partial success when anything was rejected."""

    accepted_spans: int
    rejected_spans: int
    error_message: str


@dataclass
class IngestCounters:
    requests: int = 0
    accepted_spans: int = 0
    rejected_spans: int = 0


class IngestPipeline:
    """Turns one decoded export request of one tenant into acknowledged Kafka messages."""

    def __init__(
        self,
        redactor: Redactor,
        publisher: KafkaPublisher,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        counters: IngestCounters | None = None,
    ) -> None:
        self.redactor = redactor
        self.publisher = publisher
        self.max_message_bytes = max_message_bytes
        self.counters = counters if counters is not None else IngestCounters()
        self._counters_lock = threading.Lock()

    def ingest(self, request: ExportTraceServiceRequest, tenant: str) -> IngestResult:
        """Returns once the good spans are in Kafka or the spill; raises SpillFull."""
        validation = validate_request(request)
        self.redactor.redact(request)
        received_at = time.time_ns()
        messages = [
            OutgoingMessage(key, value, tenant, received_at)
            for key, value in group_by_trace(request, self.max_message_bytes)
        ]
        self.publisher.publish(messages)
        accepted = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        with self._counters_lock:
            self.counters.requests += 1
            self.counters.accepted_spans += accepted
            self.counters.rejected_spans += validation.rejected_spans
        return IngestResult(accepted, validation.rejected_spans, validation.error_message)
