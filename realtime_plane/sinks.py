"""Alert sinks behind one `AlertSink` protocol: the alert log line, the alerts topic, the
`alerts` table and a webhook.

Alerts arrive numbered
(`NumberedAlert`: their partition of `pathgrade.spans` and their number in it,
`realtime_plane.delivery`). The table sink keeps rows until an insert succeeds, so offsets
are committed only for stored alerts, and says which numbers are stored; rows the store
cannot encode (it finds them by halving the batch) are logged, counted and dropped, so one
bad row cannot hold back every later alert. The webhook sink never blocks the plane: a
bounded in-memory queue drained by worker threads, with exponential backoff and jitter on
5xx, 429, timeouts and connection errors; with the alerts table behind it, what does not fit
in the queue (or keeps failing) is read back from the table later, so every stored alert
is delivered at least once (`WebhookSink`).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pathgrade.realtime_plane.delivery import AlertBacklog, PartitionProgress
from pathgrade.realtime_plane.webhook_http import WebhookConnection, WebhookProtocolError
from pathgrade.schemas.alert_store import AlertStore
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.topics import ALERT_LOGGER

log = logging.getLogger(__name__)
alert_log = logging.getLogger(ALERT_LOGGER)


CURSOR_SAVE_S = 2.0
"""How often the webhook saves its delivery cursors (a crash repeats at most this long of
deliveries, with the same alert keys)."""
IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The webhook request header carrying the alert key: a repeated delivery has the same."""


@dataclass(frozen=True, slots=True)
class NumberedAlert:
    """An alert with the partition of `pathgrade.spans` it came from and its number there."""

    partition: int
    number: int
    alert: Alert

    def row(self) -> list[Any]:
        """Its row of table `alerts`, in `ALERT_COLUMNS` + `SEQ_COLUMNS` order."""
        return [*self.alert.row(), self.partition, self.number]


def log_alert(alert: Alert) -> None:
    """The log record of one alert: message `alert <JSON document>`, the alert itself in
    the record's `alert` attribute (for handlers that print it another way)."""
    alert_log.info("alert %s", alert.json_text, extra={"alert": alert})


class AlertSink(Protocol):
    """Where the plane hands the alerts of each group of evaluated traces. `add` must not
    block the plane: a sink that does I/O queues or buffers and delivers on its own."""

    def add(self, alerts: list[NumberedAlert]) -> None: ...


class LogAlertSink:
    """The alert log line: one record per alert on logger `ALERT_LOGGER` (`log_alert`); how
    a process prints them is its handler's business (`pathgrade.stack.alert_log`)."""

    def add(self, alerts: list[NumberedAlert]) -> None:
        for numbered in alerts:
            log_alert(numbered.alert)


class Publisher(Protocol):
    """What the topic sink sends with: a Kafka producer (`KafkaProducer.send`)."""

    def send(self, topic: str, value: bytes, key: bytes) -> Any: ...


class TopicAlertSink:
    """Publishes each alert's JSON document to `topic`, keyed by its trace id, through the
    producer `producer()` returns (the plane's, which batches and sends on its own thread;
    None while the plane is not connected: nothing is sent)."""

    def __init__(self, topic: str, producer: Callable[[], Publisher | None]) -> None:
        self.topic = topic
        self.producer = producer

    def add(self, alerts: list[NumberedAlert]) -> None:
        producer = self.producer()
        if producer is None:
            return
        for numbered in alerts:
            alert = numbered.alert
            producer.send(self.topic, alert.to_json(), alert.trace_id.encode())


class StoreAlertSink:
    """Buffers alert rows and inserts them into table `alerts`, either now (`flush`) or in
    the background (`flush_async`), so the consuming loop never waits on the store; the
    monitors' turn rollups (`add_rollups`) are inserted with them, first.

    A background flush carries a token (the offsets the caller may commit once these
    alerts are stored); `stored_token()` hands it back after the insert succeeded. After
    every insert `on_stored` learns the highest number stored per partition.
    """

    def __init__(
        self, store: AlertStore, on_stored: Callable[[dict[int, int]], None] | None = None
    ) -> None:
        self.store = store
        self.on_stored = on_stored
        self.pending: list[list[Any]] = []
        self.pending_rollups: list[list[Any]] = []
        self.inserted = 0
        self.failures = 0
        self.rejected = 0  # rows the store could not encode: logged and dropped
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stored: Any = None

    def add(self, alerts: list[NumberedAlert]) -> None:
        with self._lock:
            self.pending.extend(alert.row() for alert in alerts)

    def add_rollups(self, rows: list[list[Any]]) -> None:
        """Rows of `monitor_rollups` (ROLLUP_COLUMNS order) to insert with the next flush."""
        with self._lock:
            self.pending_rollups.extend(rows)

    def flush(self) -> None:
        """Insert what is pending now; on failure (QueryError) the rows stay pending."""
        self.wait()
        self._insert_pending()

    def _insert_pending(self) -> None:
        with self._lock:
            rows, self.pending = self.pending, []
            rollups, self.pending_rollups = self.pending_rollups, []
        try:
            if rollups:
                self.store.insert_rollups(rollups)
            rollups = []
            if rows:
                self._insert(rows)
        except Exception:
            with self._lock:
                self.pending = rows + self.pending
                self.pending_rollups = rollups + self.pending_rollups
            raise

    def _insert(self, rows: list[list[Any]]) -> None:
        """Insert `rows`; those the store cannot encode (it halves the batch to find them:
        `insert_encodable_alerts`) are logged, counted and dropped. Any other failure propagates
        and the caller keeps all of `rows` pending."""
        rejected = self.store.insert_encodable_alerts(rows)
        for row, reason in rejected:
            self.rejected += 1
            fields = dict(zip(ALERT_COLUMNS, row, strict=False))
            log.error("alert %s of trace %s rejected by the store and dropped: %s",
                      fields["AlertKey"], fields["TraceId"], reason)  # fmt: skip
        self.inserted += len(rows) - len(rejected)
        if self.on_stored is not None:
            stored: dict[int, int] = {}
            for *_, partition, number in rows:
                stored[partition] = max(stored.get(partition, 0), number)
            self.on_stored(stored)

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
    failed: int = 0  # refused by the receiver (a 4xx other than 408 or 429): not retried
    retried: int = 0
    deferred: int = 0  # not kept in memory (queue full, or failing): read back from the table
    dropped: int = 0  # no alerts table to read back from: given up (queue full, or failing)
    latest_error: str = field(default="")


@dataclass(frozen=True, slots=True)
class _Item:
    partition: int
    number: int
    key: str
    body: bytes


Outcome = Literal["delivered", "refused", "failing"]


class WebhookSink:
    """POSTs each alert as a JSON body to `url` (header `Idempotency-Key`: the alert key)
    from a few worker threads, each keeping its connection open, so a slow receiver delays
    alerts less than one by one.

    With `backlog` (the alerts table) delivery is at least once (`realtime_plane.delivery`):
    per partition the sink knows the first alert number not yet delivered and saves it every
    CURSOR_SAVE_S (never past the highest number stored); an alert that finds the queue
    full, or whose POST failed `retries` times in a row, is read back from the table once
    stored and tried again, for as long as it takes; a plane that starts resumes each
    partition it is assigned (`claim`) at its saved cursor. Only an alert the receiver
    refuses with a 4xx (not 408 or 429) is given up, counted as failed. Without a backlog,
    such alerts are dropped and counted."""

    def __init__(
        self,
        url: str,
        queue_size: int = 10_000,
        retries: int = 5,
        timeout_s: float = 5.0,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        workers: int = 4,
        backlog: AlertBacklog | None = None,
    ) -> None:
        WebhookConnection(url, timeout_s)  # a malformed URL fails here, not later
        self.url = url
        self.retries = retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.backlog = backlog
        self.stats = WebhookStats()
        self._queue: deque[_Item] = deque()
        self._queue_size = queue_size
        self._progress: dict[int, PartitionProgress] = {}
        self._saved: dict[int, int] = {}  # partition -> the cursor saved last
        lock = threading.RLock()
        self._ready = threading.Condition(lock)  # the workers': an alert queued, or stop
        # the refill thread's, of its own: a wake-up for one worker never goes to it
        self._refill_due = threading.Condition(lock)
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._in_flight = 0
        self._threads = [
            threading.Thread(target=self._run, name=f"alert-webhook-{n}", daemon=True)
            for n in range(workers)
        ]
        if backlog is not None:
            self._threads.append(
                threading.Thread(target=self._refill_loop, name="alert-webhook-refill", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def claim(self, partitions: Iterable[int], stored: dict[int, int]) -> None:
        """Deliver the alerts of `partitions` from now on: from the saved cursor of each
        (the alerts stored past it, up to `stored`, the highest number stored, are read back
        from the table), or for a partition this webhook never delivered, from the next
        alert on. A partition still held is kept as it is. Raises the store's errors."""
        saved = self.backlog.cursors() if self.backlog is not None else {}
        with self._ready:
            claimed = {
                p: PartitionProgress.resumed(saved.get(p), stored.get(p, 0))
                for p in partitions
                if p not in self._progress
            }
            self._progress.update(claimed)
            self._saved.update({p: c for p, c in saved.items() if p in claimed})
            self._refill_due.notify()
        self._save_cursors()  # a crash before the first delivery resumes here too

    def release(self, partitions: Iterable[int]) -> None:
        """Stop delivering `partitions` (another consumer took them, or the plane stops
        reading): save their cursors and forget their queued alerts (the next owner reads
        them back from the table)."""
        partitions = set(partitions)
        self._save_cursors()
        with self._ready:
            for partition in partitions:
                self._progress.pop(partition, None)
                self._saved.pop(partition, None)
            self._queue = deque(item for item in self._queue if item.partition not in partitions)
            self._set_idle_if_done()

    def add(self, alerts: list[NumberedAlert]) -> None:
        """Queue alerts; never blocks (past the queue's size they are deferred to the table,
        or without one dropped and counted). With the table, an alert of a partition this
        sink does not hold (not claimed, or released meanwhile) is left to the table: the
        partition's next claim reads it back from the saved cursor, which an alert handed
        over here must not move past the ones before it."""
        with self._ready:
            for numbered in alerts:
                progress = self._progress.get(numbered.partition)
                if progress is None and self.backlog is not None:
                    self.stats.deferred += 1
                    continue
                if progress is None:
                    progress = PartitionProgress(numbered.number, numbered.number - 1)
                    self._progress[numbered.partition] = progress
                if len(self._queue) < self._queue_size:
                    alert = numbered.alert
                    item = _Item(
                        numbered.partition, numbered.number, alert.alert_key, alert.to_json()
                    )
                    self._queue.append(item)
                elif self.backlog is not None:
                    progress.defer(numbered.number)
                    self.stats.deferred += 1
                else:
                    progress.delivered(numbered.number)
                    self.stats.dropped += 1
                    log.warning("alert webhook queue full (%d): dropped an alert",
                                self._queue_size)  # fmt: skip
            if self._queue:
                self._idle.clear()
            self._ready.notify(len(alerts))

    def stored(self, numbers: dict[int, int]) -> None:
        """The store holds the alerts up to these numbers (partition -> highest)."""
        with self._ready:
            for partition, number in numbers.items():
                progress = self._progress.get(partition)
                if progress is not None:
                    progress.stored = max(progress.stored, number)
            self._refill_due.notify()

    def cursors(self) -> dict[int, int]:
        """Partition -> the first alert number not yet delivered."""
        with self._ready:
            return {p: progress.cursor for p, progress in self._progress.items()}

    def _run(self) -> None:
        connection = WebhookConnection(self.url, self.timeout_s)
        try:
            while True:
                with self._ready:
                    while not self._queue and not self._stop.is_set():
                        self._set_idle_if_done()
                        self._ready.wait()
                    if not self._queue:
                        return
                    item = self._queue.popleft()
                    self._in_flight += 1
                try:
                    outcome = self._deliver(connection, item)
                finally:
                    with self._ready:
                        self._in_flight -= 1
                        self._settle(item, outcome)
                        self._set_idle_if_done()
        finally:
            connection.close()

    def _settle(self, item: _Item, outcome: Outcome) -> None:
        """Called with the lock held: record what became of `item`."""
        progress = self._progress.get(item.partition)
        if outcome == "failing" and self.backlog is not None:
            self.stats.deferred += 1
            if progress is not None:
                progress.defer(item.number)
            self._refill_due.notify()
            return
        if outcome == "failing":
            self.stats.dropped += 1
        if progress is not None:
            progress.delivered(item.number)

    def _set_idle_if_done(self) -> None:
        if not self._queue and self._in_flight == 0:
            self._idle.set()

    def _deliver(self, connection: WebhookConnection, item: _Item) -> Outcome:
        header = f"{IDEMPOTENCY_HEADER}: {item.key}\r\n".encode()
        for attempt in range(self.retries + 1):
            retry, error = post_once(connection, item.body, header)
            if error is None:
                self.stats.sent += 1
                return "delivered"
            self.stats.latest_error = error
            if not retry:
                self.stats.failed += 1
                log.error("alert webhook %s refused alert %s: %s", self.url, item.key, error)
                return "refused"
            if attempt == self.retries or self._stop.is_set():
                break
            self.stats.retried += 1
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
            self._stop.wait(delay * random.uniform(0.5, 1.5))
        log.warning("alert webhook %s failing: %s", self.url, error)
        return "failing"

    def _refill_loop(self) -> None:
        """Read deferred alerts back from the table while the queue has room, and save the
        cursors every CURSOR_SAVE_S."""
        next_save = time.monotonic() + CURSOR_SAVE_S
        while not self._stop.is_set():
            try:
                if not self._refill_once():
                    with self._refill_due:
                        self._refill_due.wait(0.2)
                if time.monotonic() >= next_save:
                    next_save = time.monotonic() + CURSOR_SAVE_S
                    self._save_cursors()
            except Exception as exc:  # the store's QueryError or transport errors
                log.warning("alert webhook backlog: %s; retrying", exc)
                self._stop.wait(1.0)

    def _refill_once(self) -> bool:
        """Queue the oldest stored range of deferred alerts of one partition (as much as
        fits in half the queue); False when there was nothing to do."""
        assert self.backlog is not None
        with self._ready:
            room = self._queue_size // 2 - len(self._queue)
            wanted = next(
                ((p, progress, span) for p, progress in sorted(self._progress.items())
                 if (span := progress.next_missing()) is not None),
                None,
            )  # fmt: skip
        if room <= 0 or wanted is None:
            return False
        partition, progress, (first, last) = wanted
        rows = self.backlog.read(partition, first, last, room)
        upto = rows[-1][0] if len(rows) == room else last
        with self._ready:
            if self._progress.get(partition) is not progress:
                return True  # released meanwhile
            progress.refilled(first, upto, [number for number, _ in rows])
            self._queue.extendleft(
                _Item(partition, number, alert.alert_key, alert.to_json())
                for number, alert in reversed(rows)
            )
            if self._queue:
                self._idle.clear()
            self._ready.notify_all()
        return True

    def _save_cursors(self) -> None:
        """Save the cursors that moved since they were saved last (with a backlog), each
        cut at the highest number stored (`PartitionProgress.cursor_to_save`)."""
        if self.backlog is None:
            return
        with self._ready:
            moved = {
                p: cursor
                for p, progress in self._progress.items()
                if self._saved.get(p) != (cursor := progress.cursor_to_save())
            }
        self.backlog.save(moved)
        with self._ready:
            self._saved.update(moved)

    def close(self, timeout_s: float = 10.0) -> None:
        """Deliver what is queued (up to `timeout_s`), save the cursors, stop the threads
        (what is deferred is delivered by the next plane on these partitions)."""
        self._idle.wait(timeout_s)
        with self._ready:
            self._stop.set()
            self._ready.notify_all()
            self._refill_due.notify()
        for thread in self._threads:
            thread.join(timeout_s)
        try:
            self._save_cursors()
        except Exception as exc:  # the store's QueryError or transport errors
            log.warning("alert webhook: saving the delivery cursors failed: %s", exc)


def post_once(
    connection: WebhookConnection, body: bytes, headers: bytes = b""
) -> tuple[bool, str | None]:
    """(retryable, error or None) of one POST with extra header lines `headers`; a
    kept-alive connection that the receiver closed meanwhile is reopened once on the spot."""
    for _attempt in range(2 if connection.reused else 1):
        try:
            status = connection.post(body, headers)
            break
        except (OSError, WebhookProtocolError) as exc:
            error = str(exc) or type(exc).__name__
    else:
        return True, error
    if 200 <= status < 300:
        return False, None
    return status >= 500 or status in (408, 429), f"HTTP {status}"
