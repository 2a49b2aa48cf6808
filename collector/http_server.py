"""An HTTP/1.1 server whose requests run on a fixed pool of threads.

The standard library's ThreadingHTTPServer starts a thread per connection and keeps it
for the connection's life, so a thousand idle keep-alive connections hold a thousand
threads. Here one selector thread watches every open connection and reads each request's
head (request line and headers) as its bytes arrive; a complete head is handed, with the
connection, to a pool of `workers` threads, which reads the body and answers; the
connection then goes back to the selector. So:

- an idle connection costs a file descriptor, not a thread, and is closed once it has
  sent nothing for `idle_timeout_s`;
- a connection that sends part of a head and stops never reaches a worker: it is answered
  408 and closed `read_timeout_s` after its first byte; a body that stops coming is timed
  out by the worker's socket after `read_timeout_s` without a byte (answered 408);
- beyond `max_connections` (or when the process runs out of file descriptors) the
  longest-idle connection is closed to admit a new one.

Handlers subclass `PooledRequestHandler` (a `BaseHTTPRequestHandler` set up once per
connection); `ready_at` is when the current request's head was complete, so a handler can
count the time its request waited for a worker.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import queue
import selectors
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 32
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 4096
MAX_HEAD_BYTES = 1024 * 1024
"""A head not complete within this many bytes goes to a worker anyway, whose parser
answers 414 or 431."""
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_HEAD_ENDS = (b"\r\n\r\n", b"\n\n")


class PooledRequestHandler(BaseHTTPRequestHandler):
    """A request handler of one connection of a PooledHTTPServer: set up once, then one
    `handle_one_request` per head the selector read."""

    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.1"  # even a malformed request line gets a status line
    server: PooledHTTPServer

    def __init__(self, request: socket.socket, client_address: tuple, server: PooledHTTPServer):
        # Not BaseRequestHandler.__init__, which would handle the whole connection now.
        self.request = request
        self.client_address = client_address
        self.server = server
        self.timeout = server.read_timeout_s
        self.ready_at = time.monotonic()
        self.close_connection = True
        self.requestline = ""
        self.setup()
        self.rfile.close()  # replaced per head by `read_from`
        self.read_from(b"")

    def read_from(self, head: bytes) -> None:
        """Read the next request from `head` (already received), then from the socket."""
        self.rfile = io.BufferedReader(_PrefixedSocket(head, self.connection))

    def timed_out_answer(self) -> tuple[bytes, str]:
        """Body and content type of the 408 for a head that stopped coming."""
        return f"request not completed within {self.timeout:g} s\n".encode(), "text/plain"

    def parse_request(self) -> bool:
        """The stock parser; the rest of a head over MAX_HEAD_BYTES that stops coming gets
        408 instead of silence."""
        try:
            return super().parse_request()
        except TimeoutError:
            self.send_error(408, f"headers not completed within {self.timeout:g} s")
            return False


class _PrefixedSocket(io.RawIOBase):
    """Raw reads of bytes already received, then of the socket (blocking, with the
    socket's timeout)."""

    def __init__(self, prefix: bytes, sock: socket.socket) -> None:
        self._prefix = memoryview(prefix)
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._prefix:
            count = min(len(buffer), len(self._prefix))
            buffer[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            return count
        try:
            return self._sock.recv_into(buffer)
        except BlockingIOError:
            return None  # type: ignore[return-value]  # no bytes yet (a non-blocking peek)


class _Connection:
    """One accepted connection, its handler and the head being read."""

    __slots__ = ("handler", "head", "since", "sock")

    def __init__(self, sock: socket.socket, handler: PooledRequestHandler) -> None:
        self.sock = sock
        self.handler = handler
        self.head = bytearray()
        self.since = time.monotonic()  # idle since, or since the head's first byte


class PooledHTTPServer:
    """Serve `handler_class` on `address` with a bounded pool; `serve_forever()` in one
    thread, `shutdown()` from another, then `server_close()`."""

    def __init__(
        self,
        address: tuple[str, int],
        handler_class: type[PooledRequestHandler],
        workers: int = DEFAULT_WORKERS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.handler_class = handler_class
        self.idle_timeout_s = idle_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self.socket = socket.create_server(address, backlog=1024)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="otlp-http")
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._returned: queue.SimpleQueue[_Connection] = queue.SimpleQueue()
        # Watched connections, oldest first: idle ones, and those with part of a head.
        self._idle: OrderedDict[socket.socket, _Connection] = OrderedDict()
        self._reading: OrderedDict[socket.socket, _Connection] = OrderedDict()
        self._busy = 0  # connections handed to the pool (changed by the selector thread)
        self._serving = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        """Accept, read heads, dispatch and expire until `shutdown()`."""
        self._serving.set()
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                for key, _ in self._selector.select(self._select_timeout()):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_reader:
                        self._drain_wakeups()
                    else:
                        self._read_head(key.data)
                self._take_back_returned()
                self._expire()
        finally:
            self._stopped.set()

    def _select_timeout(self) -> float:
        """Until the next connection expires (at most 1 s)."""
        deadlines = [
            next(iter(watched.values())).since + timeout
            for watched, timeout in ((self._idle, self.idle_timeout_s),
                                     (self._reading, self.read_timeout_s))
            if watched
        ]  # fmt: skip
        return min([1.0, *(max(0.0, d - time.monotonic()) for d in deadlines)])

    def _accept(self) -> None:
        """Accept every pending connection; make room when the bound or the descriptors
        run out by closing the longest-idle one."""
        while True:
            try:
                sock, address = self.socket.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_DESCRIPTORS:
                    raise
                log.warning("OTLP/HTTP: cannot accept a connection: %s", exc)
                if not self._close_oldest(self._idle):
                    time.sleep(0.05)  # every connection is busy; let one finish
                return
            watched = len(self._idle) + len(self._reading) + self._busy
            if watched >= self.max_connections and not self._close_oldest(self._idle):
                sock.close()  # every connection is busy: refuse this one
                continue
            try:
                handler = self.handler_class(sock, address, self)
            except OSError:
                sock.close()
                continue
            self._watch(_Connection(sock, handler))

    def _watch(self, connection: _Connection) -> None:
        connection.since = time.monotonic()
        self._idle[connection.sock] = connection
        self._selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _read_head(self, connection: _Connection) -> None:
        """Take the bytes a watched connection has; hand a complete head to the pool."""
        try:
            data = connection.sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client closed (or reset) the connection
            self._forget(connection)
            _close(connection)
            return
        if not connection.head:  # the first byte of a head: the read timeout starts
            del self._idle[connection.sock]
            connection.since = time.monotonic()
            self._reading[connection.sock] = connection
        connection.head += data
        tail = bytes(connection.head[-(len(data) + 3) :])
        if any(end in tail for end in _HEAD_ENDS) or len(connection.head) > MAX_HEAD_BYTES:
            self._dispatch(connection)

    def _dispatch(self, connection: _Connection) -> None:
        """Hand a connection with a complete head to the pool."""
        self._forget(connection)
        self._busy += 1
        connection.handler.read_from(bytes(connection.head))
        connection.head.clear()
        connection.handler.ready_at = time.monotonic()
        self._pool.submit(self._serve, connection)

    def _forget(self, connection: _Connection) -> None:
        """Stop watching a connection (it goes to a worker, or is closed)."""
        self._selector.unregister(connection.sock)
        self._idle.pop(connection.sock, None)
        self._reading.pop(connection.sock, None)

    def _serve(self, connection: _Connection) -> None:
        """Worker: answer the requests whose bytes are already here, then give the
        connection back to the selector (or close it)."""
        handler = connection.handler
        try:
            while True:
                handler.handle_one_request()
                if handler.close_connection or not _has_buffered_bytes(connection):
                    break
                handler.ready_at = time.monotonic()
        except OSError as exc:  # the client went away mid-answer
            log.debug("OTLP/HTTP: connection from %s lost: %s", handler.client_address, exc)
            handler.close_connection = True
        except Exception:  # a handler's bug must not take the worker down
            log.exception("OTLP/HTTP: request from %s failed", handler.client_address)
            handler.close_connection = True
        self._returned.put(connection)
        self._wake()

    def _take_back_returned(self) -> None:
        while True:
            try:
                connection = self._returned.get_nowait()
            except queue.Empty:
                return
            self._busy -= 1
            if connection.handler.close_connection or self._stopping.is_set():
                _close(connection)
            else:
                self._watch(connection)

    def _expire(self) -> None:
        """Close idle connections past the idle timeout; answer 408 to heads that stopped
        coming past the read timeout."""
        now = time.monotonic()
        while self._idle and next(iter(self._idle.values())).since <= now - self.idle_timeout_s:
            self._close_oldest(self._idle)
        while self._reading and (
            next(iter(self._reading.values())).since <= now - self.read_timeout_s
        ):
            _, connection = self._reading.popitem(last=False)
            self._selector.unregister(connection.sock)
            _answer_timed_out(connection)
            _close(connection)

    def _close_oldest(self, watched: OrderedDict[socket.socket, _Connection]) -> bool:
        if not watched:
            return False
        _, connection = watched.popitem(last=False)
        self._selector.unregister(connection.sock)
        _close(connection)
        return True

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a wake-up is already pending, or closing
            self._wake_writer.send(b"\0")

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_reader.recv(4096):
                pass

    def shutdown(self) -> None:
        """Stop `serve_forever` (requests under way finish in `server_close`)."""
        self._stopping.set()
        self._wake()
        if self._serving.is_set():
            self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket, let requests under way finish, close every
        connection."""
        self.socket.close()
        self._pool.shutdown(wait=True)
        self._take_back_returned()
        while self._close_oldest(self._idle) or self._close_oldest(self._reading):
            pass
        self._selector.close()
        self._wake_reader.close()
        self._wake_writer.close()


def _has_buffered_bytes(connection: _Connection) -> bool:
    """Whether the next request's bytes are already read into the handler's buffer or
    waiting on the socket (a pipelined request), without blocking."""
    sock = connection.sock
    sock.setblocking(False)
    try:
        return bool(connection.handler.rfile.peek(1))
    except OSError:
        return False
    finally:
        sock.settimeout(connection.handler.timeout)


def _answer_timed_out(connection: _Connection) -> None:
    """Best effort, never blocking: a 408 for a head that stopped coming."""
    body, content_type = connection.handler.timed_out_answer()
    head = (
        f"HTTP/1.1 408 Request Timeout\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with contextlib.suppress(OSError):
        connection.sock.send(head.encode() + body, socket.MSG_DONTWAIT)


def _close(connection: _Connection) -> None:
    """Flush and close the handler's files, then the socket (as socketserver does)."""
    with contextlib.suppress(OSError):
        connection.handler.finish()
    with contextlib.suppress(OSError):
        connection.sock.shutdown(socket.SHUT_WR)
    connection.sock.close()
