"""The OTLP/HTTP receiver's connections: uvicorn (httptools' HTTP/1.1 parser on asyncio),
with the bounds a server facing the network needs and uvicorn leaves open.

A connection costs a file descriptor and a little memory on the event loop, never a
thread: requests are read on the loop, whole, and only then handed to the request
handler's pool of worker threads (`collector.http_receiver`), so slow and idle
connections hold no worker. Here, per connection:

- one that sends nothing is closed after `idle_timeout_s`, from its accept and after each
  answer;
- a request head (request line and headers) must be whole within `read_timeout_s` of its
  first byte (408), within MAX_HEAD_BYTES, with a request line and header lines of at most
  MAX_LINE_BYTES (414, 431) and at most MAX_HEADERS headers (431);
- a head the parser refuses gets a 400 saying why (a Content-Length that is not one
  decimal integer, two of them, a method that is no HTTP method...), or 411 for a
  Content-Length beside a Transfer-Encoding;
- past `max_connections` open connections, the longest-idle one (between requests) is
  closed to admit a new one, else the one whose request has been arriving for longest (a
  new connection's from its accept; a request being processed is never closed); when
  every one is being processed, the new one is closed.

Every refusal here is answered in JSON (no content type is known yet) and closes the
connection. The body's bounds are the handler's, which reads it (`Exchange` tells it when
the head was whole and whether the client ended the body early).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
import socket
import threading
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import httptools
import uvicorn
from pathgrade.collector.http_answers import TRANSFER_ENCODING_REFUSED, raw_answer
from pathgrade.collector.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
)
from pathgrade.transport.quiet_server import QuietServer
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 1024 * 1024
"""Longest request head (request line and headers together): 431 beyond it."""
MAX_LINE_BYTES = 64 * 1024
"""Longest request line (414 beyond it) and header line (431)."""
MAX_HEADERS = 100
"""Most header lines in a request head: 431 beyond it."""
DESCRIPTOR_RESERVE = 512
"""File descriptors kept for the rest of the process (Kafka, the spill, gRPC, ...)
beside the receiver's connections."""
EXCHANGE = "pathgrade.exchange"
"""The key of a request's `Exchange` in its ASGI scope's `extensions`."""

_IDLE, _RECEIVING, _PROCESSING = "idle", "receiving", "processing"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds on each connection (the module's docstring says what each does)."""

    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS


class Exchange:
    """One request as its connection reads it, for the handler: when its head was whole
    (`head_at`, the event loop's clock: `time.monotonic()`), whether the client ended the
    body early (half-closed the connection); `processing()` once the handler holds the
    whole body."""

    __slots__ = ("_connection", "ended_early", "head_at")

    def __init__(self, connection: OtlpConnection, head_at: float) -> None:
        self._connection = connection
        self.head_at = head_at
        self.ended_early = False

    def processing(self) -> None:
        """The request is read whole: its connection can no longer be closed to admit
        another, nor at shutdown before it is answered."""
        self._connection.table.move(self._connection, _PROCESSING)


class _ConnectionTable:
    """The open connections by what they are doing, each kind oldest first (dicts keep
    insertion order; a connection moved goes last)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._phases: dict[str, dict[OtlpConnection, None]] = {
            _IDLE: {}, _RECEIVING: {}, _PROCESSING: {},
        }  # fmt: skip
        self._phase_of: dict[OtlpConnection, str] = {}

    def admit(self, connection: OtlpConnection) -> bool:
        """Count a new connection in, closing the longest-idle one (else the one whose
        request has been arriving longest) when the limit is reached; False when every
        connection is processing a request (the new one is to be closed). A new connection
        awaits its first request: it counts as arriving from its accept, never as idle (on
        a loaded loop its first bytes may not have been read yet)."""
        if len(self._phase_of) >= self.limit:
            victim = next(iter(self._phases[_IDLE]), None) or next(
                iter(self._phases[_RECEIVING]), None
            )
            if victim is None:
                log.warning("OTLP/HTTP: %d connections are all busy; refused one", self.limit)
                return False
            self.drop(victim)
            victim.transport.close()
        self._phases[_RECEIVING][connection] = None
        self._phase_of[connection] = _RECEIVING
        return True

    def move(self, connection: OtlpConnection, phase: str) -> None:
        """Record that `connection` is now `phase`, the newest of it (no-op once dropped,
        or when already there: it keeps its place)."""
        current = self._phase_of.get(connection)
        if current is None or current == phase:
            return
        del self._phases[current][connection]
        self._phases[phase][connection] = None
        self._phase_of[connection] = phase

    def phase(self, connection: OtlpConnection) -> str | None:
        return self._phase_of.get(connection)

    def drop(self, connection: OtlpConnection) -> None:
        phase = self._phase_of.pop(connection, None)
        if phase is not None:
            del self._phases[phase][connection]


class _Refusal(Exception):
    """A head this server refuses: the status and the reason."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class OtlpConnection(HttpToolsProtocol):
    """uvicorn's httptools connection with the bounds of the module's docstring. Overrides
    the protocol's own steps (connection made and lost, data, the parser's callbacks, the
    end of an answer, shutdown), calling uvicorn's for the rest."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        table: _ConnectionTable,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.table = table
        self.limits = limits
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._headers = 0
        self._deferred: bytes | None = None  # a refusal to write after the answer under way
        self.exchange: Exchange | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.table.admit(self):
            transport.close()
            return
        self.timeout_keep_alive_task = self.loop.call_later(
            self.limits.idle_timeout_s, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self.table.drop(self)
        self._stop_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser (the idle timer stops only when a request begins: bytes that
        start none, such as blank lines, leave the connection idle)."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            refusal = exc.__context__
            if not isinstance(refusal, _Refusal):
                raise
            self._refuse(refusal.status, str(refusal))
            return
        except httptools.HttpParserUpgrade:  # Upgrade (h2c, websocket) is not offered: the
            if self.cycle is not None:  # request is answered in HTTP/1.1, and the connection
                self.cycle.keep_alive = False  # closed (its next bytes are another protocol's)
            return
        except httptools.HttpParserError as exc:
            self._refuse(*_explain(exc))
            return
        if self._head_timer is not None:  # the head goes on in the next bytes
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                message = f"request head over {MAX_HEAD_BYTES} bytes"
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, message)

    def eof_received(self) -> bool | None:
        """The client half-closed: a request being answered still gets its answer (and a
        body cut short its 400); an idle connection, or one in the middle of a head, is
        closed."""
        if self.cycle is None or self.cycle.response_complete:
            return None
        if self.cycle.more_body and self.exchange is not None:
            self.exchange.ended_early = True
            self.cycle.message_event.set()
        self.cycle.keep_alive = False
        return True

    # The parser's callbacks (a `_Refusal` raised in one stops the parser).

    def on_message_begin(self) -> None:
        self._unset_keepalive_if_required()
        super().on_message_begin()
        self._head_bytes = 0
        self._headers = 0
        self.table.move(self, _RECEIVING)
        self._head_timer = self.loop.call_later(self.limits.read_timeout_s, self._head_timed_out)

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > MAX_LINE_BYTES:
            raise _Refusal(
                HTTPStatus.REQUEST_URI_TOO_LONG, f"request line too long (over {MAX_LINE_BYTES})"
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        if self._headers > MAX_HEADERS:
            message = f"Too many headers (more than {MAX_HEADERS})"
            raise _Refusal(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, message)
        if len(name) + len(value) > MAX_LINE_BYTES:
            message = f"Line too long: a header line over {MAX_LINE_BYTES} bytes"
            raise _Refusal(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, message)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        self.exchange = Exchange(self, self.loop.time())
        self.scope["extensions"] = {EXCHANGE: self.exchange}
        super().on_headers_complete()

    # The end of an answer, shutdown, timers.

    def on_response_complete(self) -> None:
        if self._deferred is not None:
            self.transport.write(self._deferred)
            self.transport.close()
            return
        next_waits = bool(self.pipeline) or self._head_timer is not None
        super().on_response_complete()
        if not self.transport.is_closing():
            self.table.move(self, _RECEIVING if next_waits else _IDLE)

    def shutdown(self) -> None:
        """Close a connection whose request is still arriving (nothing of it was
        accepted); let one being processed finish its answer."""
        if self.table.phase(self) != _PROCESSING:
            self.transport.close()
        else:
            super().shutdown()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        timeout = self.limits.read_timeout_s
        self._refuse(HTTPStatus.REQUEST_TIMEOUT, f"request not completed within {timeout:g} s")

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """Answer a head this server refuses and close the connection (after the answer
        under way, if a pipelined request is being answered)."""
        self._stop_head_timer()
        self.table.drop(self)
        if self.transport.is_closing():
            return
        answer = raw_answer(status, message)
        if self.cycle is not None and not self.cycle.response_complete:
            self._deferred = answer
            self.flow.pause_reading()
            return
        self.transport.write(answer)
        self.transport.close()


def _explain(error: httptools.HttpParserError) -> tuple[HTTPStatus, str]:
    """The status and message of a head the parser refused."""
    reason = str(error)
    if "Content-Length" in reason and "Transfer-Encoding" in reason:
        return HTTPStatus.LENGTH_REQUIRED, TRANSFER_ENCODING_REFUSED
    if "Duplicate Content-Length" in reason:
        return HTTPStatus.BAD_REQUEST, "conflicting Content-Length headers: send one"
    if "Content-Length" in reason:
        return (
            HTTPStatus.BAD_REQUEST,
            f"Content-Length must be a non-negative decimal integer ({reason})",
        )
    if isinstance(error, httptools.HttpParserInvalidMethodError):
        return HTTPStatus.BAD_REQUEST, f"Bad request type or request line ({reason})"
    return HTTPStatus.BAD_REQUEST, f"Bad request ({reason})"


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer when the process may not open that many file descriptors and
    DESCRIPTOR_RESERVE more (its soft limit is raised towards the hard one first): a
    connection refused by the kernel could not make room by closing an idle one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + DESCRIPTOR_RESERVE
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError) as exc:
            log.warning("OTLP/HTTP: cannot raise the open-files limit to %d: %s", raised, exc)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted
    cap = max(1, soft - DESCRIPTOR_RESERVE)
    log.warning("OTLP/HTTP: at most %d connections (the process may open %d files)", cap, soft)
    return cap


class UvicornServer:
    """uvicorn serving an ASGI `app` on `address` through `OtlpConnection`:
    `serve_forever()` in one thread, `shutdown()` from another (requests being processed
    finish within `grace_s`), then `server_close()`."""

    def __init__(
        self, address: tuple[str, int], app: Any, limits: ConnectionLimits, grace_s: float
    ) -> None:
        self.socket = socket.create_server(address, backlog=1024)  # bound now: the port is known
        self.server_address = self.socket.getsockname()
        table = _ConnectionTable(connection_cap(limits.max_connections))
        protocol = functools.partial(OtlpConnection, table=table, limits=limits)
        config = uvicorn.Config(
            app, http=protocol, ws="none", lifespan="off", loop="asyncio", log_config=None,
            access_log=False, proxy_headers=False, server_header=False, date_header=False,
            timeout_keep_alive=limits.idle_timeout_s, timeout_graceful_shutdown=grace_s,
        )  # fmt: skip
        self._server = QuietServer(config)
        self._serving = threading.Event()
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        """Serve until `shutdown()`."""
        self._serving.set()
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def start(self, name: str) -> None:
        """Serve in a daemon thread named `name` until `shutdown()` (which waits for it
        even when called before the thread runs)."""
        self._serving.set()
        threading.Thread(target=self.serve_forever, name=name, daemon=True).start()

    def shutdown(self) -> None:
        """Stop serving: close idle and arriving connections, let requests being
        processed finish."""
        self._server.stop()
        if self._serving.is_set():
            self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()


logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
