"""Alert sinks: the `alerts` table, a webhook, and a structured log line.

(Kafka topics are written by the plane's producer directly.) The table sink keeps rows
until an insert succeeds, so offsets are committed only for stored alerts. The webhook
sink never blocks the plane: a bounded queue (oldest dropped and counted when full) drained
by its own thread, with exponential backoff and jitter on 5xx, timeouts and connection
errors.
"""

from __future__ import annotations

import logging
import random
import threading
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from schemas.alerts import ALERT_COLUMNS, Alert

log = logging.getLogger(__name__)
alert_log = logging.getLogger("pathgrade.alerts")


def log_alert(alert: Alert) -> None:
    """The structured log line of one alert: `alert <JSON document>`."""
    alert_log.info("alert %s", alert.model_dump_json())


class StoreAlertSink:
    """Buffers alert rows and inserts them into table `alerts` on `flush`."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.pending: list[list[Any]] = []
        self.inserted = 0

    def add(self, alerts: list[Alert]) -> None:
        self.pending.extend(alert.row() for alert in alerts)

    def flush(self) -> None:
        """Insert what is pending; on failure (QueryError) the rows stay pending."""
        if self.pending:
            self.store.insert("alerts", self.pending, column_names=list(ALERT_COLUMNS))
            self.inserted += len(self.pending)
            self.pending = []


@dataclass
class WebhookStats:
    sent: int = 0
    failed: int = 0  # given up after the retries (or a 4xx)
    retried: int = 0
    dropped: int = 0  # queue full: oldest dropped
    latest_error: str = field(default="")


class WebhookSink:
    """POSTs each alert as a JSON body to `url` from its own thread."""

    def __init__(
        self,
        url: str,
        queue_size: int = 10_000,
        retries: int = 5,
        timeout_s: float = 5.0,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
    ) -> None:
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
        self._thread = threading.Thread(target=self._run, name="alert-webhook", daemon=True)
        self._thread.start()

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
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._stop.is_set():
                    self._idle.set()
                    self._ready.wait()
                if not self._queue:
                    return
                body = self._queue.popleft()
            self._deliver(body)

    def _deliver(self, body: bytes) -> None:
        for attempt in range(self.retries + 1):
            retry, error = self._post(body)
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

    def _post(self, body: bytes) -> tuple[bool, str | None]:
        """(retryable, error or None) for one POST."""
        request = urllib.request.Request(
            self.url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
            return False, None
        except urllib.error.HTTPError as exc:
            return exc.code >= 500 or exc.code == 429, f"HTTP {exc.code}"
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return True, str(getattr(exc, "reason", exc))

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued (up to `timeout_s`), then stop the thread."""
        self._idle.wait(timeout_s)
        with self._ready:
            self._stop.set()
            self._ready.notify()
        self._thread.join(timeout_s)
