"""Kafka over TLS, configured by PATHGRADE_KAFKA_* variables: the real broker behind a TLS
listener (a TLS relay in front of Tansu, which advertises the relay's address, as a
cluster with TLS listeners does), the real collector and the official OTLP exporter."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.schemas.topics import SPANS_TOPIC
from pathgrade.transport.kafka_settings import kafka_client_settings

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port, tansu_binary, wait_for_kafka
from tests.integration.conftest import start_collector
from tests.support import LoopbackServer
from tests.unit.realtime_plane.test_webhook_http import self_signed

pytestmark = pytest.mark.integration


class TlsRelay(LoopbackServer):
    """Accepts TLS on a loopback port and relays each connection, decrypted, to `target`."""

    def __init__(self, context: ssl.SSLContext, target: int) -> None:
        self.context, self.target = context, target
        super().__init__()

    def serve(self, client: socket.socket, number: int) -> None:
        try:
            secure = self.context.wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            client.close()  # a plaintext client: the handshake fails
            return
        upstream = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=_pump, args=(upstream, secure), daemon=True).start()
        _pump(secure, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            end.close()


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(bootstrap address, CA file) of a broker reachable over TLS only."""
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    plain = free_port()
    relay = TlsRelay(context, plain)
    broker = subprocess.Popen(
        [tansu_binary(), "broker", "--listener-url", f"tcp://127.0.0.1:{plain}",
         "--advertised-listener-url", f"tcp://127.0.0.1:{relay.port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{relay.port}", cert
    finally:
        broker.terminate()
        broker.wait(timeout=30)
        relay.close()


def topics(bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "topics", "--kafka", bootstrap],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_spans_reach_kafka_over_tls_with_the_settings_and_not_without(
    tls_broker: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap, ca_file = tls_broker
    without = topics(bootstrap)
    assert without.returncode != 0  # plaintext cannot talk to a TLS listener

    monkeypatch.setenv("PATHGRADE_KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("PATHGRADE_KAFKA_SSL_CAFILE", str(ca_file))
    wait_for_kafka(bootstrap, timeout_s=30)
    created = topics(bootstrap)
    assert created.returncode == 0, created.stderr
    assert SPANS_TOPIC in created.stdout
    collector, _, http_port = start_collector(bootstrap, tmp_path / "spill")
    try:
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
        sent = send_demo_traces(exporter, traces=5, seed=3)
        consumer = KafkaConsumer(
            SPANS_TOPIC, **kafka_client_settings(bootstrap), auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
        )  # fmt: skip
        keys = {message.key.decode() for message in consumer}
        consumer.close()
    finally:
        assert collector.terminate() == 0, collector.output
    assert keys == set(sent.trace_ids)
    assert "spilled" not in collector.output


def test_bad_kafka_settings_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATHGRADE_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("PATHGRADE_KAFKA_SASL_USERNAME", "agent")
    refused = topics("127.0.0.1:9")
    assert refused.returncode == 2
    assert "PATHGRADE_KAFKA_SASL_PASSWORD: required with SASL_SSL" in refused.stderr
