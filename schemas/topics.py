"""Kafka topic, consumer-group and header names (and the alert log line's logger): the wire
contract between the boxes. The clients' settings are `transport.kafka_settings`."""

from __future__ import annotations

SPANS_TOPIC = "pathgrade.spans"
LOGS_TOPIC = "pathgrade.logs"
"""OTLP log records (GenAI events as records: messages, decisions, evaluation results) in
the OTel Collector Kafka exporter's `otlp_proto` logs encoding (`LogsData`), with the
headers of `pathgrade.spans`. A message holds records of the traces (of one request) whose
trace id in lowercase hex, taken as a key, goes to one partition, keyed by its first
record's trace id, so it lands where each of its traces' spans do (one trace per message,
keyed by it, as the exporter's `partition_logs_by_trace_id` writes, is read alike: readers
split records by trace). It has as many partitions as `pathgrade.spans`, so a trace's
records and spans share a partition number (co-partitioned: a consumer of both topics is
assigned the same numbers of each, as Kafka Streams joins)."""
ALERTS_TOPIC = "pathgrade.alerts"
ALERT_LOGGER = "pathgrade.alerts"
"""Logger of the structured alert log line `alert {json}` (INFO; shown by default)."""
SAMPLED_TOPIC = "pathgrade.sampled"
TURNS_TOPIC = "pathgrade.turns"
"""Digests of the conversation turns the realtime consumers evaluated (JSON
`schemas.turns.TurnBatch`, key and WORKER_HEADER = the publishing consumer), so each
consumer of the group sees earlier turns that others evaluated."""

ALL_TOPICS = (SPANS_TOPIC, LOGS_TOPIC, ALERTS_TOPIC, SAMPLED_TOPIC, TURNS_TOPIC)

STORE_GROUP = "pathgrade-store"
REALTIME_GROUP = "pathgrade-realtime"
SCORER_GROUP = "pathgrade-scorer"

# Headers on every pathgrade.spans and pathgrade.logs message.
TENANT_HEADER = "pathgrade.tenant"
RECEIVED_AT_HEADER = "pathgrade.received_at_ns"  # decimal nanoseconds since the epoch
WORKER_HEADER = "pathgrade.worker"  # on pathgrade.turns: the consumer that published it
MAC_HEADER = "pathgrade.mac"
"""On every message the stack's processes write, with a message key: its HMAC-SHA256
(`transport.message_auth`)."""

DEFAULT_TENANT = "default"
