"""kafka-python settings every pathgrade client shares: the cluster's address, TLS and SASL
from PATHGRADE_KAFKA_* environment variables, and what a pathgrade consumer group sets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
