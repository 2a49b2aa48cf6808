"""PATHGRADE_KAFKA_* -> kafka-python client settings, and the errors that name the
variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.transport.kafka_settings import (
    KafkaSettingsError,
    consumer_settings,
    kafka_client_settings,
)

P = "PATHGRADE_KAFKA_"


def test_plaintext_by_default_and_tls_and_sasl_when_asked(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    assert kafka_client_settings("k:9092", {}) == {"bootstrap_servers": "k:9092"}
    assert kafka_client_settings("k:9092", {f"{P}SECURITY_PROTOCOL": ""}) == {
        "bootstrap_servers": "k:9092"
    }
    assert kafka_client_settings(
        "k:9092", {f"{P}SECURITY_PROTOCOL": "ssl", f"{P}SSL_CAFILE": str(ca)}
    ) == {"bootstrap_servers": "k:9092", "security_protocol": "SSL", "ssl_cafile": str(ca)}
    sasl = {
        f"{P}SECURITY_PROTOCOL": "SASL_SSL", f"{P}SASL_MECHANISM": "scram-sha-512",
        f"{P}SASL_USERNAME": "agent", f"{P}SASL_PASSWORD": "s3cret", f"{P}SSL_CAFILE": str(ca),
    }  # fmt: skip
    assert kafka_client_settings("k:9092", sasl) == {
        "bootstrap_servers": "k:9092", "security_protocol": "SASL_SSL", "ssl_cafile": str(ca),
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "agent",
        "sasl_plain_password": "s3cret",
    }  # fmt: skip
    plain = {**sasl, f"{P}SECURITY_PROTOCOL": "SASL_PLAINTEXT"}
    assert "ssl_cafile" not in kafka_client_settings("k:9092", plain)  # no TLS to configure


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({f"{P}SECURITY_PROTOCOL": "TLS"}, "SECURITY_PROTOCOL: expected one of PLAINTEXT"),
        ({f"{P}SECURITY_PROTOCOL": "SSL", f"{P}SSL_CAFILE": "/nope.pem"}, "SSL_CAFILE: no such"),
        (
            {f"{P}SECURITY_PROTOCOL": "SASL_PLAINTEXT", f"{P}SASL_MECHANISM": "GSSAPI"},
            "SASL_MECHANISM: expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, got 'GSSAPI'",
        ),
        ({f"{P}SECURITY_PROTOCOL": "SASL_SSL"}, "SASL_USERNAME: required with SASL_SSL"),
    ],
)
def test_bad_settings_name_the_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSettingsError, match=message):
        kafka_client_settings("k:9092", environ)


def test_consumer_groups_share_the_client_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{P}SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv(f"{P}SASL_USERNAME", "u")
    monkeypatch.setenv(f"{P}SASL_PASSWORD", "p")
    settings = consumer_settings("k:9092", "pathgrade-store")
    assert settings["security_protocol"] == "SASL_PLAINTEXT"
    assert settings["sasl_mechanism"] == "PLAIN" and settings["group_id"] == "pathgrade-store"


def test_the_bundled_broker_drops_the_settings_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from pathgrade.stack.embedded import _ignore_kafka_security_settings

    monkeypatch.setenv(f"{P}SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv(f"{P}SSL_CAFILE", "/etc/ca.pem")
    _ignore_kafka_security_settings()
    assert kafka_client_settings("127.0.0.1:1") == {"bootstrap_servers": "127.0.0.1:1"}
    assert f"{P}SECURITY_PROTOCOL, {P}SSL_CAFILE" in caplog.text
