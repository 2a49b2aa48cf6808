"""A minimal kept-alive HTTP/1.1 client for the alert webhook: POST a JSON body, read the
status.

The webhook posts one alert per request, hundreds a second under load, from threads that
share the realtime plane's interpreter lock. The standard library's client parses every
answer's headers with its e-mail parser; this one (0.42-0.46 of its CPU per POST in
bench/webhook.py, most of the rest being the socket calls themselves) sends the request
in one write and reads the answer by hand: the status line, the few
headers that frame the body (Content-Length, Transfer-Encoding: chunked, Connection), and
the body, which it discards. Interim 1xx answers are skipped; an answer with no length
is read to the end of the connection. https uses the system's trust store.
"""

from __future__ import annotations

import socket
import ssl
from typing import BinaryIO
from urllib.parse import urlsplit

MAX_LINE_BYTES = 64 * 1024
MAX_HEADERS = 100
_NO_BODY_STATUSES = frozenset({204, 304})


class WebhookProtocolError(Exception):
    """The receiver answered something that is not HTTP/1.x."""


class WebhookConnection:
    """One connection to the webhook URL, opened on first use and reopened after the
    receiver closed it (the caller retries a failed POST on a reused connection once)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"alert webhook URL {url!r}: expected http(s)://host[:port]/path")
        self.timeout_s = timeout_s
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.netloc.rpartition("@")[2]
        self._head = (
            f"POST {target} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            "Content-Length: "
        ).encode()
        self._socket: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self.reused = False  # the next POST goes over a connection that answered before

    def post(self, body: bytes, headers: bytes = b"") -> int:
        """POST `body` with extra header lines `headers` (each ending in CRLF); returns the
        status. Raises OSError (network, timeout) or WebhookProtocolError, after which the
        connection is closed."""
        try:
            return self._post(body, headers)
        except BaseException:
            self.close()
            raise

    def _post(self, body: bytes, headers: bytes) -> int:
        if self._socket is None:
            self._open()
        assert self._socket is not None
        self.reused = False
        length = str(len(body)).encode()
        self._socket.sendall(self._head + length + b"\r\n" + headers + b"\r\n" + body)
        version, status, headers = self._read_head()
        while 100 <= status < 200:
            version, status, headers = self._read_head()
        connection = headers.get(b"connection", b"").lower()
        closes = connection == b"close" or (version == b"HTTP/1.0" and connection != b"keep-alive")
        if self._skip_body(status, headers):
            closes = True
        if closes:
            self.close()
        else:
            self.reused = True
        return status

    def _open(self) -> None:
        raw = socket.create_connection((self._host, self._port), timeout=self.timeout_s)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket = self._tls.wrap_socket(raw, server_hostname=self._host) if self._tls else raw
        self._reader = self._socket.makefile("rb")

    def _line(self) -> bytes:
        assert self._reader is not None
        line = self._reader.readline(MAX_LINE_BYTES + 1)
        if not line:
            raise WebhookProtocolError("the receiver closed the connection without answering")
        if len(line) > MAX_LINE_BYTES:
            raise WebhookProtocolError(f"answer line longer than {MAX_LINE_BYTES} bytes")
        return line

    def _read_head(self) -> tuple[bytes, int, dict[bytes, bytes]]:
        """(version, status, lowercased header -> value) of one answer."""
        status_line = self._line()
        version, _, rest = status_line.partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise WebhookProtocolError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        headers: dict[bytes, bytes] = {}
        for _ in range(MAX_HEADERS + 1):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return version, int(code), headers
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        raise WebhookProtocolError(f"more than {MAX_HEADERS} answer headers")

    def _skip_body(self, status: int, headers: dict[bytes, bytes]) -> bool:
        """Read and discard the answer's body; True when it ran to the connection's end."""
        assert self._reader is not None
        if status in _NO_BODY_STATUSES:
            return False
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            while size := self._chunk_size():
                self._read_exactly(size)
                self._line()  # the CRLF after the chunk
            while self._line() not in (b"\r\n", b"\n"):
                pass  # trailers
            return False
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise WebhookProtocolError(f"bad Content-Length {length[:40]!r}")
            self._read_exactly(int(length))
            return False
        while self._reader.read(65536):
            pass
        return True

    def _chunk_size(self) -> int:
        line = self._line()
        digits = line.split(b";")[0].strip()
        try:
            return int(digits, 16)
        except ValueError:
            raise WebhookProtocolError(f"bad chunk size line {line[:40]!r}") from None

    def _read_exactly(self, size: int) -> None:
        assert self._reader is not None
        while size > 0:
            chunk = self._reader.read(min(size, 65536))
            if not chunk:
                raise WebhookProtocolError("the receiver closed the connection mid-answer")
            size -= len(chunk)

    def close(self) -> None:
        for part in (self._reader, self._socket):
            if part is not None:
                part.close()
        self._reader = self._socket = None
        self.reused = False
