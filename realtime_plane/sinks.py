"""Alert sinks behind one `AlertSink` protocol: the `alerts` table, a webhook; and a
structured log line.

(Kafka topics are written by the plane's producer directly.) The table sink keeps rows
until an insert succeeds, so offsets are committed only for stored alerts; rows the store
cannot encode (it finds them by halving the batch) are logged, counted and dropped, so one
bad row cannot hold back every later alert. The webhook
sink never blocks the plane: a bounded queue (oldest dropped and counted when full) drained
by its own thread, with exponential backoff and jitter on 5xx, timeouts and connection
errors.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from pathgrade.realtime_plane.webhook_http import WebhookConnection, WebhookProtocolError
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.store import Store
from pathgrade.schemas.topics import ALERT_LOGGER

log = logging.getLogger(__name__)
alert_log = logging.getLogger(ALERT_LOGGER)


def log_alert(alert: Alert) -> None:
    """The log record of one alert: message `alert <JSON document>`, the alert itself in
    the record's `alert` attribute (for handlers that print it another way)."""
    alert_log.info("alert %s", alert.json_text, extra={"alert": alert})


class AlertSink(Protocol):
    """Where the plane hands the alerts of each group of evaluated traces. `add` must not
    block the plane: a sink that does I/O queues or buffers and delivers on its own."""

    def add(self, alerts: list[Alert]) -> None: ...


class StoreAlertSink:
    """Buffers alert rows and inserts them into table `alerts`, either now (`flush`) or in
    the background (`flush_async`), so the consuming loop never waits on the store.

    A background flush carries a token (the offsets the caller may commit once these
    alerts are stored); `stored_token()` hands it back after the insert succeeded.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pending: list[list[Any]] = []
        self.inserted = 0
        self.failures = 0
        self.rejected = 0  # rows the store could not encode: logged and dropped
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stored: Any = None

    def add(self, alerts: list[Alert]) -> None:
        with self._lock:
            self.pending.extend(alert.row() for alert in alerts)

    def flush(self) -> None:
        """Insert what is pending now; on failure (QueryError) the rows stay pending."""
        self.wait()
        self._insert_pending()

    def _insert_pending(self) -> None:
        with self._lock:
            rows, self.pending = self.pending, []
        if not rows:
            return
        try:
            self._insert(rows)
        except Exception:
            with self._lock:
                self.pending = rows + self.pending
            raise

    def _insert(self, rows: list[list[Any]]) -> None:
        """Insert `rows`; those the store cannot encode (it halves the batch to find them:
        `insert_encodable`) are logged, counted and dropped. Any other failure propagates
        and the caller keeps all of `rows` pending."""
        rejected = self.store.insert_encodable("alerts", rows, list(ALERT_COLUMNS))
        for row, reason in rejected:
            self.rejected += 1
            fields = dict(zip(ALERT_COLUMNS, row, strict=True))
            log.error("alert %s of trace %s rejected by the store and dropped: %s",
                      fields["AlertKey"], fields["TraceId"], reason)  # fmt: skip
        self.inserted += len(rows) - len(rejected)

    def flush_async(self, token: Any) -> bool:
        """Start inserting what is pending in the background unless an insert is still
        running (then False); `token` comes back from `stored_token()` once stored."""
        if self._worker is not None and self._worker.is_alive():
            return False

        def work() -> None:
            try:
                self._insert_pending()
            except Exception as exc:  # the store's QueryError or transport errors
                self.failures += 1
                log.error("storing alerts failed, offsets not committed: %s", exc)
                return
            self._stored = token

        self._worker = threading.Thread(target=work, name="alert-store", daemon=True)
        self._worker.start()
        return True

    def stored_token(self) -> Any:
        """The token of the last background insert that succeeded (once), else None."""
        token, self._stored = self._stored, None
        return token

    def wait(self) -> None:
        """Wait for a background insert to finish."""
        if self._worker is not None:
            self._worker.join()


@dataclass
class WebhookStats:
    sent: int = 0
    failed: int = 0  # given up after the retries (or a 4xx)
    retried: int = 0
    dropped: int = 0  # queue full: oldest dropped
    latest_error: str = field(default="")


class WebhookSink:
    """POSTs each alert as a JSON body to `url` from a few worker threads, each keeping
    its connection open, so a slow receiver delays alerts less than one by one."""

    def __init__(
        self,
        url: str,
        queue_size: int = 10_000,
        retries: int = 5,
        timeout_s: float = 5.0,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        workers: int = 4,
    ) -> None:
        WebhookConnection(url, timeout_s)  # a malformed URL fails here, not later
        self.url = url
        self.retries = retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.stats = WebhookStats()
        self._queue: deque[bytes] = deque()
        self._queue_size = queue_size
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._in_flight = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"alert-webhook-{n}", daemon=True)
            for n in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def add(self, alerts: list[Alert]) -> None:
        """Queue alerts; never blocks (drops and counts the oldest when the queue is full)."""
        with self._ready:
            for alert in alerts:
                if len(self._queue) >= self._queue_size:
                    self._queue.popleft()
                    self.stats.dropped += 1
                    log.warning("alert webhook queue full (%d): dropped the oldest alert",
                                self._queue_size)  # fmt: skip
                self._queue.append(alert.to_json())
            if self._queue:
                self._idle.clear()
            self._ready.notify(len(alerts))

    def _run(self) -> None:
        connection = WebhookConnection(self.url, self.timeout_s)
        try:
            while True:
                with self._ready:
                    while not self._queue and not self._stop.is_set():
                        if self._in_flight == 0:
                            self._idle.set()
                        self._ready.wait()
                    if not self._queue:
                        return
                    body = self._queue.popleft()
                    self._in_flight += 1
                try:
                    self._deliver(connection, body)
                finally:
                    with self._ready:
                        self._in_flight -= 1
                        if not self._queue and self._in_flight == 0:
                            self._idle.set()
        finally:
            connection.close()

    def _deliver(self, connection: WebhookConnection, body: bytes) -> None:
        for attempt in range(self.retries + 1):
            retry, error = post_once(connection, body)
            if error is None:
                self.stats.sent += 1
                return
            self.stats.latest_error = error
            if not retry or attempt == self.retries or self._stop.is_set():
                break
            self.stats.retried += 1
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
            self._stop.wait(delay * random.uniform(0.5, 1.5))
        self.stats.failed += 1
        log.error("alert webhook %s failed: %s", self.url, self.stats.latest_error)

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued (up to `timeout_s`), then stop the thread."""
        self._idle.wait(timeout_s)
        with self._ready:
            self._stop.set()
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout_s)


def post_once(connection: WebhookConnection, body: bytes) -> tuple[bool, str | None]:
    """(retryable, error or None) of one POST; a kept-alive connection that the receiver
    closed meanwhile is reopened once on the spot."""
    for _attempt in range(2 if connection.reused else 1):
        try:
            status = connection.post(body)
            break
        except (OSError, WebhookProtocolError) as exc:
            error = str(exc) or type(exc).__name__
    else:
        return True, error
    if 200 <= status < 300:
        return False, None
    return status >= 500 or status == 429, f"HTTP {status}"
