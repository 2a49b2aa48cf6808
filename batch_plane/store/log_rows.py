"""Canonical log records -> column data for the ClickHouse `logs` table (migration 0015).

Values are stringified as `span_rows` does for spans (the OTel Collector's ClickHouse
exporter's way, so Grafana's log views read `LogAttributes` as `otel_logs`): captured
content (`schemas.genai.is_content_key`) goes to `ContentAttributes` and the body to `Body`,
both kept only for the content retention; the facts stay in `LogAttributes`. A record's
`Timestamp` is its time, else its observed time, else when the collector received it.
`RecordHash` is a digest of everything the row holds of the record, so a record read twice
is one row after merges.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pathgrade.batch_plane.store.span_rows import attribute_text, attributes_text, split_content
from pathgrade.schemas.json_text import sorted_compact
from pathgrade.schemas.model import LogRecord

LOG_COLUMNS: tuple[str, ...] = (
    "Timestamp", "TraceId", "SpanId", "TraceFlags", "SeverityText", "SeverityNumber",
    "ServiceName", "Body", "ResourceAttributes", "ScopeName", "ScopeVersion", "LogAttributes",
    "EventName", "ContentAttributes", "Tenant", "ReceivedAt", "RecordHash",
)  # fmt: skip


def log_row(record: LogRecord) -> list[Any]:
    """The values of one record in LOG_COLUMNS order."""
    attributes, content = split_content(record.attributes)
    body = "" if record.body is None else attribute_text(record.body)
    timestamp = record.time_ns or record.observed_ns or record.received_at_ns
    identity = sorted_compact(
        [record.tenant, record.trace_id, record.span_id, record.time_ns, record.observed_ns,
         record.event_name, record.severity_number, record.severity_text, body, attributes,
         content]
    )  # fmt: skip
    digest = hashlib.blake2b(identity.encode(), digest_size=8).digest()
    return [
        timestamp, record.trace_id, record.span_id, record.flags & 0xFF, record.severity_text,
        record.severity_number, record.service_name, body,
        attributes_text(record.resource_attributes), record.scope_name, record.scope_version,
        attributes, record.event_name, content, record.tenant, record.received_at_ns,
        int.from_bytes(digest, "big"),
    ]  # fmt: skip
