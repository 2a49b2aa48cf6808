"""WebhookSink: retries 5xx with backoff, gives up on 4xx, drops oldest when full."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pathgrade.realtime_plane.sinks import WebhookSink
from pathgrade.schemas.alerts import Alert


def alert(code: str = "PG110") -> Alert:
    return Alert(
        alert_key="k" + code, code=code, name="n", severity="high", kind="violation",
        reason="r", trace_id="ab" * 16, span_id="cd" * 8, tenant="t", service="s", agent="a",
        conversation_id="", risk_tier="medium", policy="default", trace_start_ns=1,
        trace_end_ns=2, detected_at_ns=3,
    )  # fmt: skip


class Receiver(ThreadingHTTPServer):
    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.statuses = statuses  # answered in turn; 200 once exhausted
        self.bodies: list[dict] = []
        self.calls = 0


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        server = self.server
        status = server.statuses[server.calls] if server.calls < len(server.statuses) else 200
        server.calls += 1
        if status == 200:
            server.bodies.append(json.loads(body))
        self.send_response(status)
        self.end_headers()


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(request.param)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def url(server: Receiver) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/alerts"


@pytest.mark.parametrize("receiver", [[500, 503]], indirect=True)
def test_5xx_is_retried_until_delivered(receiver: Receiver) -> None:
    sink = WebhookSink(url(receiver), backoff_s=0.01)
    sink.add([alert()])
    sink.close()
    assert receiver.calls == 3 and sink.stats.retried == 2 and sink.stats.sent == 1
    assert receiver.bodies[0]["code"] == "PG110" and receiver.bodies[0]["schema_version"] == 1


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
def test_4xx_fails_without_retry_and_is_counted(receiver: Receiver) -> None:
    sink = WebhookSink(url(receiver), backoff_s=0.01)
    sink.add([alert("PG101"), alert("PG102")])
    sink.close()
    assert (sink.stats.failed, sink.stats.sent, receiver.calls) == (1, 1, 2)


def test_unreachable_webhook_never_blocks_and_drops_oldest() -> None:
    sink = WebhookSink("http://127.0.0.1:9/x", queue_size=2, retries=1, backoff_s=5)
    sink.add([alert(f"PG1{i:02d}") for i in range(10)])  # returns at once
    assert sink.stats.dropped >= 7
    sink.close(timeout_s=1)
    assert sink.stats.sent == 0


class _KeepAliveHandler(_Handler):
    """HTTP/1.1 with keep-alive; closes the connection after every second request, as a
    receiver with a short idle timeout would."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.server.connections.add(self.client_address)  # type: ignore[attr-defined]
        super().do_POST()
        if self.server.calls % 2 == 0:
            self.close_connection = True

    def end_headers(self) -> None:
        self.send_header("Content-Length", "0")
        super().end_headers()


def test_connections_are_kept_alive_and_reopened_when_the_receiver_closes() -> None:
    server = Receiver([])
    server.RequestHandlerClass = _KeepAliveHandler
    server.connections = set()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = WebhookSink(url(server), workers=1, backoff_s=5.0)  # a retry would show
        sink.add([alert(f"PG1{n:02d}") for n in range(6)])
        sink.close(timeout_s=5)
        assert [b["code"] for b in server.bodies] == [f"PG1{n:02d}" for n in range(6)]
        assert (sink.stats.sent, sink.stats.retried, sink.stats.failed) == (6, 0, 0)
        assert len(server.connections) == 3  # type: ignore[attr-defined]
    finally:
        server.shutdown()


def test_malformed_webhook_url_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="alert webhook URL 'localhost:9/x'"):
        WebhookSink("localhost:9/x")
