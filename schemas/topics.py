"""Kafka topic, consumer-group and header names: the wire contract between the boxes."""

SPANS_TOPIC = "pathgrade.spans"
ALERTS_TOPIC = "pathgrade.alerts"
SAMPLED_TOPIC = "pathgrade.sampled"

ALL_TOPICS = (SPANS_TOPIC, ALERTS_TOPIC, SAMPLED_TOPIC)

STORE_GROUP = "pathgrade-store"
REALTIME_GROUP = "pathgrade-realtime"

# Headers on every pathgrade.spans message.
TENANT_HEADER = "pathgrade.tenant"
RECEIVED_AT_HEADER = "pathgrade.received_at_ns"  # decimal nanoseconds since the epoch

DEFAULT_TENANT = "default"
