"""An HTTP/1.1 server whose requests run on a fixed pool of threads.

The standard library's ThreadingHTTPServer starts a thread per connection and keeps it
for the connection's life, so a thousand idle keep-alive connections hold a thousand
threads. Here one selector thread watches every open connection; when one has bytes to
read, one request on it is handed to a pool of `workers` threads, and the connection goes
back to the selector after the answer. So:

- an idle connection costs a file descriptor, not a thread, and is closed once it has
  sent nothing for `idle_timeout_s`;
- a request that stalls part-way (headers or body not completed) is timed out by its
  socket after `read_timeout_s` without a byte, and answered 408 when its request line
  came;
- beyond `max_connections` (or when the process runs out of file descriptors) the
  longest-idle connection is closed to admit a new one.

Handlers subclass `PooledRequestHandler` (a `BaseHTTPRequestHandler` set up once per
connection); `ready_at` is when the selector saw the current request's first bytes, so a
handler can count the time its request waited for a worker.
"""

from __future__ import annotations

import contextlib
import errno
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
_OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class PooledRequestHandler(BaseHTTPRequestHandler):
    """A request handler of one connection of a PooledHTTPServer: set up once, then one
    `handle_one_request` per turn the connection has bytes to read."""

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
        self.setup()

    def parse_request(self) -> bool:
        """The stock parser; headers that stop coming get 408 instead of silence."""
        try:
            return super().parse_request()
        except TimeoutError:
            self.send_error(408, f"headers not completed within {self.timeout:g} s")
            return False


class _Connection:
    """One accepted connection and its handler."""

    __slots__ = ("handler", "idle_since", "sock")

    def __init__(self, sock: socket.socket, handler: PooledRequestHandler) -> None:
        self.sock = sock
        self.handler = handler
        self.idle_since = time.monotonic()


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
        self._idle: OrderedDict[socket.socket, _Connection] = OrderedDict()  # oldest first
        self._busy = 0  # connections handed to the pool (changed by the selector thread)
        self._serving = threading.Event()
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        """Accept, watch and dispatch until `shutdown()`."""
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
                        self._dispatch(key.data)
                self._take_back_returned()
                self._close_expired()
        finally:
            self._stopped.set()

    def _select_timeout(self) -> float:
        """Until the longest-idle connection expires (at most 1 s)."""
        if not self._idle:
            return 1.0
        oldest = next(iter(self._idle.values()))
        return min(1.0, max(0.0, oldest.idle_since + self.idle_timeout_s - time.monotonic()))

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
                if not self._close_oldest_idle():
                    time.sleep(0.05)  # every connection is busy; let one finish
                return
            full = len(self._idle) + self._busy >= self.max_connections
            if full and not self._close_oldest_idle():
                sock.close()  # every connection is busy: refuse this one
                continue
            try:
                handler = self.handler_class(sock, address, self)
            except OSError:
                sock.close()
                continue
            self._watch(_Connection(sock, handler))

    def _watch(self, connection: _Connection) -> None:
        connection.idle_since = time.monotonic()
        self._idle[connection.sock] = connection
        self._selector.register(connection.sock, selectors.EVENT_READ, connection)

    def _dispatch(self, connection: _Connection) -> None:
        """A watched connection has bytes: hand its next request to the pool."""
        self._selector.unregister(connection.sock)
        del self._idle[connection.sock]
        self._busy += 1
        connection.handler.ready_at = time.monotonic()
        self._pool.submit(self._serve, connection)

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

    def _close_expired(self) -> None:
        deadline = time.monotonic() - self.idle_timeout_s
        while self._idle and next(iter(self._idle.values())).idle_since <= deadline:
            self._close_oldest_idle()

    def _close_oldest_idle(self) -> bool:
        if not self._idle:
            return False
        _, connection = self._idle.popitem(last=False)
        self._selector.unregister(connection.sock)
        _close(connection)
        return True

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # a wake-up is already pending, or closing
            self._wake_writer.send(b"\0")

    def _drain_wakeups(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except BlockingIOError:
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
        while self._close_oldest_idle():
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


def _close(connection: _Connection) -> None:
    """Flush and close the handler's files, then the socket (as socketserver does)."""
    with contextlib.suppress(OSError):
        connection.handler.finish()
    with contextlib.suppress(OSError):
        connection.sock.shutdown(socket.SHUT_WR)
    connection.sock.close()
