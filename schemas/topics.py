"""Kafka topic, consumer-group and header names (and the alert log line's logger): the wire
contract between the boxes, and the consumer settings every pathgrade consumer group
shares."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
KAFKA_SETTINGS_PREFIX = "PATHGRADE_KAFKA_"  # environment variables of kafka_client_settings


class KafkaSettingsError(ValueError):
    """A PATHGRADE_KAFKA_* variable is invalid; the message names it and why."""


def kafka_client_settings(
    bootstrap_servers: str, environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """kafka-python settings every pathgrade client of the cluster at `bootstrap_servers`
    shares: the address, and TLS and SASL from the environment (so secrets never sit on a
    command line): PATHGRADE_KAFKA_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT,
    SASL_SSL), PATHGRADE_KAFKA_SSL_CAFILE / _SSL_CERTFILE / _SSL_KEYFILE (PEM files),
    PATHGRADE_KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
    PATHGRADE_KAFKA_SASL_USERNAME and PATHGRADE_KAFKA_SASL_PASSWORD. Raises
    KafkaSettingsError naming the variable that is wrong."""
    settings: dict[str, Any] = {"bootstrap_servers": bootstrap_servers}
    protocol = _choice(environ, "SECURITY_PROTOCOL", SECURITY_PROTOCOLS)
    if protocol == "PLAINTEXT":
        return settings
    settings["security_protocol"] = protocol
    for name in ("SSL_CAFILE", "SSL_CERTFILE", "SSL_KEYFILE"):
        path = environ.get(KAFKA_SETTINGS_PREFIX + name)
        if path and not Path(path).is_file():
            raise KafkaSettingsError(f"{KAFKA_SETTINGS_PREFIX}{name}: no such file {path!r}")
        if path and protocol.endswith("SSL"):
            settings[name.lower()] = path
    if protocol.startswith("SASL"):
        mechanism = _choice(environ, "SASL_MECHANISM", SASL_MECHANISMS)
        for name in ("SASL_USERNAME", "SASL_PASSWORD"):
            if not environ.get(KAFKA_SETTINGS_PREFIX + name):
                raise KafkaSettingsError(f"{KAFKA_SETTINGS_PREFIX}{name}: required with {protocol}")
        settings.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=environ[KAFKA_SETTINGS_PREFIX + "SASL_USERNAME"],
            sasl_plain_password=environ[KAFKA_SETTINGS_PREFIX + "SASL_PASSWORD"],
        )
    return settings


def _choice(environ: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """The value of PATHGRADE_KAFKA_<name> (upper-cased), one of `choices` (the first when
    unset)."""
    value = (environ.get(KAFKA_SETTINGS_PREFIX + name) or choices[0]).upper()
    if value not in choices:
        raise KafkaSettingsError(
            f"{KAFKA_SETTINGS_PREFIX}{name}: expected one of {', '.join(choices)}, got {value!r}"
        )
    return value


def consumer_settings(
    bootstrap_servers: str, group_id: str, session_timeout_ms: int = 6000, **overrides: Any
) -> dict[str, Any]:
    """kafka-python consumer settings of a pathgrade group: commits only after the work is
    stored (no auto-commit), a new group starts at the earliest offset (brokers' end-offset
    answers are not relied on), and a short session so a joining member waits seconds, not
    the default 23 s."""
    return {
        **kafka_client_settings(bootstrap_servers),
        "group_id": group_id,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": session_timeout_ms,
        "heartbeat_interval_ms": max(500, session_timeout_ms // 4),
        **overrides,
    }


DRAIN_IDLE_S = 0.5
"""Before a broker's data ends (the embedded stack stopping or swapping it), consumers
read on after their targets until nothing came for this long."""


def read_until_drained(
    poll: Callable[[], int], caught_up: Callable[[], bool], timeout_s: float, idle_s: float = 0.0
) -> None:
    """Call `poll` (it returns how many messages it read) until `caught_up()`, then, with
    `idle_s`, on until its polls read nothing for `idle_s` (what other producers wrote,
    before a broker's data ends); gives up after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        if not caught_up():
            poll()
            continue
        if not idle_s:
            return
        read = poll()
        now = time.monotonic()
        if read or quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= idle_s:
            return
