"""The webhook's HTTP/1.1 client against a scripted receiver on a real socket: every way a
receiver may frame its answer, kept-alive connections, and https with a trusted and an
untrusted certificate."""

from __future__ import annotations

import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from pathgrade.realtime_plane.sinks import post_once
from pathgrade.realtime_plane.webhook_http import WebhookConnection, WebhookProtocolError

from tests.support import LoopbackServer


class ScriptedReceiver(LoopbackServer):
    """Answers each request with the next scripted bytes; an answer ending the script's
    `close` marker closes the connection after it. Records (connection number, body)."""

    def __init__(self, answers: list[bytes], tls: ssl.SSLContext | None = None) -> None:
        self.answers = list(answers)
        self.requests: list[tuple[int, bytes]] = []
        self.heads: list[bytes] = []
        self.tls = tls
        super().__init__()

    def serve(self, raw: socket.socket, number: int) -> None:
        try:
            sock = self.tls.wrap_socket(raw, server_side=True) if self.tls else raw
        except (ssl.SSLError, OSError):
            raw.close()
            return
        reader = sock.makefile("rb")
        with sock:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                self.heads.append(head)
                self.requests.append((number, reader.read(length)))
                answer = self.answers.pop(0) if self.answers else OK
                sock.sendall(answer.removesuffix(CLOSE))
                if answer.endswith(CLOSE):
                    return

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/hook?x=1"


CLOSE = b"<close>"
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[ScriptedReceiver]:
    server = ScriptedReceiver(request.param)
    yield server
    server.close()


@pytest.mark.parametrize(
    "receiver",
    [
        [
            b"HTTP/1.1 202 Accepted\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: t\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
        ]
    ],
    indirect=True,
)
def test_framed_answers_keep_one_connection(receiver: ScriptedReceiver) -> None:
    connection = WebhookConnection(receiver.url(), 5.0)
    statuses = [connection.post(f'{{"n":{n}}}'.encode()) for n in range(5)]
    assert statuses == [202, 200, 204, 503, 200]
    assert receiver.requests == [(1, f'{{"n":{n}}}'.encode()) for n in range(5)]
    head = receiver.heads[0]
    assert head.startswith(b"POST /hook?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{receiver.port}\r\n".encode() in head
    assert b"Content-Type: application/json\r\n" in head
    connection.close()


@pytest.mark.parametrize(
    "receiver",
    [
        [
            b"HTTP/1.0 200 OK\r\n\r\nbody until the end" + CLOSE,
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n" + CLOSE,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" + CLOSE,  # closes unannounced
        ]
    ],
    indirect=True,
)
def test_closing_receivers_get_a_new_connection(receiver: ScriptedReceiver) -> None:
    connection = WebhookConnection(receiver.url(), 5.0)
    assert connection.post(b"{}") == 200 and not connection.reused
    assert connection.post(b"{}") == 200 and not connection.reused
    assert connection.post(b"{}") == 200 and connection.reused
    # The receiver closed that kept-alive connection: the one retry reopens it.
    assert post_once(connection, b'{"last":1}') == (False, None)
    assert [number for number, _ in receiver.requests] == [1, 2, 3, 4]
    connection.close()


@pytest.mark.parametrize(
    "receiver",
    [[b"SMTP ready\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: x1\r\n\r\n"]],
    indirect=True,
)
def test_a_garbled_answer_is_an_error_and_closes(receiver: ScriptedReceiver) -> None:
    connection = WebhookConnection(receiver.url(), 5.0)
    with pytest.raises(WebhookProtocolError, match=r"not an HTTP/1\.x status line"):
        connection.post(b"{}")
    assert not connection.reused
    with pytest.raises(WebhookProtocolError, match="bad Content-Length"):
        connection.post(b"{}")
    retry, error = post_once(connection, b"{}")  # the script is done: 200 now
    assert (retry, error) == (False, None)


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_https_with_a_trusted_and_an_untrusted_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = ScriptedReceiver([], tls=context)
    try:
        untrusted = WebhookConnection(server.url("https"), 5.0)
        retry, error = post_once(untrusted, b"{}")
        assert retry and error is not None and "CERTIFICATE_VERIFY_FAILED" in error
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = WebhookConnection(server.url("https"), 5.0)
        assert trusted.post(b'{"tls":1}') == 200
        assert server.requests[-1][1] == b'{"tls":1}'
        trusted.close()
    finally:
        server.close()
