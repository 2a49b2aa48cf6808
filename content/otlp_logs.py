"""Decode OTLP protobuf logs into canonical log records (the reader side of `pathgrade.logs`).

A message value is an OTLP `LogsData` or `ExportLogsServiceRequest` (both hold
`resource_logs` as field 1) holding the records of one or more traces. Ids become lowercase
hex ("" for a record without one), attribute values and the body keep their OTLP types (as
`content.otlp` decodes spans), the event name is the record's own field, else its
`event.name` attribute (how SDKs before the field wrote it). Tenant and receive time come
from the message's headers, as for `pathgrade.spans`. As spans are, a value is read by the
OTLP reader (content/_otlp_reader.c, `read_logs`) where it reads it as upb does, else parsed
by upb and walked here; both give the same records (tests/unit/content/test_otlp_logs_reader.py).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData
from pathgrade.content.otlp import (
    DecodeProblems,
    any_value,
    attributes_dict,
    message_tenant_and_time,
    read_logs,
    service_name_of,
)
from pathgrade.schemas.allowed_keys import EVENT_NAME
from pathgrade.schemas.model import LogRecord

EVENT_NAME_ATTRIBUTE = EVENT_NAME


def decode_logs_message(value: bytes, tenant: str, received_at_ns: int) -> list[LogRecord]:
    """Canonical records of a `pathgrade.logs` message value, in the order they appear;
    ValueError on bytes that are not OTLP LogsData. Read by the OTLP reader in one pass
    where it reads them as upb does (`otlp.read_logs`), else parsed by upb."""
    read = read_logs(value) if read_logs is not None else None
    if read is None:
        return decode_logs_data(parse_logs_message(value), tenant, received_at_ns)
    records = []
    for resource_attributes, scopes in read:
        service = service_name_of(resource_attributes)
        for scope_name, scope_version, parts in scopes:
            for (
                trace_id, span_id, at_ns, observed_ns, event_name, severity_number,
                severity_text, body, attributes, flags,
            ) in parts:  # fmt: skip
                records.append(LogRecord(
                    tenant, trace_id, span_id, at_ns, observed_ns,
                    _event_name(event_name, attributes), severity_number, severity_text, body,
                    attributes, service, resource_attributes, scope_name, scope_version, flags,
                    received_at_ns,
                ))  # fmt: skip
    return records


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
                records.append(LogRecord(
                    tenant, record.trace_id.hex(), record.span_id.hex(),
                    record.time_unix_nano, record.observed_time_unix_nano,
                    _event_name(record.event_name, attributes), record.severity_number,
                    record.severity_text,
                    any_value(record.body) if record.HasField("body") else None, attributes,
                    service, resource_attributes, scope.name, scope.version, record.flags,
                    received_at_ns,
                ))  # fmt: skip
    return records


def _event_name(field: str, attributes: dict[str, Any]) -> str:
    """A record's event name: its own field, else its `event.name` attribute as text."""
    name = field or attributes.get(EVENT_NAME_ATTRIBUTE, "")
    return name if isinstance(name, str) else str(name)


def decode_logs_kafka_message(
    message: Any, problems: DecodeProblems | None = None
) -> list[LogRecord]:
    """Canonical records of one `pathgrade.logs` Kafka message (value and headers); raises
    ValueError when its value is not OTLP LogsData."""
    tenant, received_at = message_tenant_and_time(message, problems)
    return decode_logs_message(message.value, tenant, received_at)
