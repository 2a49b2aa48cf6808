"""The collector's counters (`IngestCounters`): requests, spans and log records accepted
and rejected. A plain dataclass apart from the pipeline, so that the stack shares it across
processes without importing the collector."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class IngestCounters:
    """Requests, spans and log records the collector accepted and rejected."""

    requests: int = 0
    accepted_spans: int = 0
    rejected_spans: int = 0
    log_requests: int = 0
    accepted_log_records: int = 0
    rejected_log_records: int = 0
