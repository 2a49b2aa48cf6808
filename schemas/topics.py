"""Kafka topic, consumer-group and header names (and the alert log line's logger): the wire
contract between the boxes, and the consumer settings every pathgrade consumer group
shares."""

from __future__ import annotations

import time
from typing import Any

SPANS_TOPIC = "pathgrade.spans"
ALERTS_TOPIC = "pathgrade.alerts"
ALERT_LOGGER = "pathgrade.alerts"
"""Logger of the structured alert log line `alert {json}` (INFO; shown by default)."""
SAMPLED_TOPIC = "pathgrade.sampled"

ALL_TOPICS = (SPANS_TOPIC, ALERTS_TOPIC, SAMPLED_TOPIC)

STORE_GROUP = "pathgrade-store"
REALTIME_GROUP = "pathgrade-realtime"

# Headers on every pathgrade.spans message.
TENANT_HEADER = "pathgrade.tenant"
RECEIVED_AT_HEADER = "pathgrade.received_at_ns"  # decimal nanoseconds since the epoch

DEFAULT_TENANT = "default"


def consumer_settings(
    bootstrap_servers: str, group_id: str, session_timeout_ms: int = 6000, **overrides: Any
) -> dict[str, Any]:
    """kafka-python consumer settings of a pathgrade group: commits only after the work is
    stored (no auto-commit), a new group starts at the earliest offset (brokers' end-offset
    answers are not relied on), and a short session so a joining member waits seconds, not
    the default 23 s."""
    return {
        "bootstrap_servers": bootstrap_servers,
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


class IdleReads:
    """Whether a consumer's reads have stopped for `seconds`: call `over(read)` after each
    poll with how many messages it returned (used to drain what other producers wrote
    before a consumer closes)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._since: float | None = None

    def over(self, read: int) -> bool:
        now = time.monotonic()
        if read or self._since is None:
            self._since = now
        return not read and now - self._since >= self.seconds
