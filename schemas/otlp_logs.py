"""Decode OTLP protobuf logs into canonical log records (the reader side of `pathgrade.logs`).

A message value is an OTLP `LogsData` or `ExportLogsServiceRequest` (both hold
`resource_logs` as field 1) holding the records of one trace. Ids become lowercase hex ("" for
a record without one), attribute values and the body keep their OTLP types (as
`schemas.otlp` decodes spans), the event name is the record's own field, else its
`event.name` attribute (how SDKs before the field wrote it). Tenant and receive time come
from the message's headers, as for `pathgrade.spans`.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from pathgrade.schemas.allowed_keys import EVENT_NAME
from pathgrade.schemas.model import LogRecord
from pathgrade.schemas.otlp import (
    DecodeProblems,
    any_value,
    attributes_dict,
    message_tenant_and_time,
    service_name_of,
)

EVENT_NAME_ATTRIBUTE = EVENT_NAME


def decode_logs_message(value: bytes, tenant: str, received_at_ns: int) -> list[LogRecord]:
    """Canonical records of a `pathgrade.logs` message value, in the order they appear;
    ValueError on bytes that are not OTLP LogsData."""
    return decode_logs_data(parse_logs_message(value), tenant, received_at_ns)


def parse_logs_message(value: bytes) -> LogsData:
    """A `pathgrade.logs` message value parsed; ValueError when it is not LogsData."""
    logs = LogsData()
    try:
        logs.ParseFromString(value)
    except DecodeError as error:
        raise ValueError(f"pathgrade.logs message value: not OTLP LogsData: {error}") from error
    return logs


def decode_logs_data(logs: Any, tenant: str, received_at_ns: int) -> list[LogRecord]:
    """Canonical records of parsed `LogsData` (or an `ExportLogsServiceRequest`)."""
    records = []
    for resource_logs in logs.resource_logs:
        resource_attributes = attributes_dict(resource_logs.resource.attributes)
        service = service_name_of(resource_attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            for record in scope_logs.log_records:
                attributes = attributes_dict(record.attributes)
                name = record.event_name or attributes.get(EVENT_NAME_ATTRIBUTE, "")
                records.append(LogRecord(
                    tenant, record.trace_id.hex(), record.span_id.hex(),
                    record.time_unix_nano, record.observed_time_unix_nano,
                    name if isinstance(name, str) else str(name), record.severity_number,
                    record.severity_text,
                    any_value(record.body) if record.HasField("body") else None, attributes,
                    service, resource_attributes, scope.name, scope.version, record.flags,
                    received_at_ns,
                ))  # fmt: skip
    return records


def decode_logs_kafka_message(
    message: Any, problems: DecodeProblems | None = None
) -> list[LogRecord]:
    """Canonical records of one `pathgrade.logs` Kafka message (value and headers); raises
    ValueError when its value is not OTLP LogsData."""
    tenant, received_at = message_tenant_and_time(message, problems)
    return decode_logs_message(message.value, tenant, received_at)
