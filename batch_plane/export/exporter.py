"""The results exporter: scores and alerts from their tables to an OTLP logs endpoint, at
least once, on a thread of its own.

For each source (`scores`, `alerts`) it keeps a cursor, the last row delivered in the
order the store took the rows (`ResultsBacklog`), and reads the rows after it a page at a
time (`batch_records`), only rows the store has held for `settle_s`. A page goes out as
requests of at most `batch_bytes`; the cursor moves past a request's rows only once the
receiver acknowledged it. A receiver that is down, slow or answering 5xx is retried with
exponential backoff and jitter for as long as it takes; one that refuses a request as bad
(400, 413) gets its halves apart, and a single record it refuses is given up, logged and
counted. The cursors are saved in `export_cursors` every CURSOR_SAVE_S and on stop, so a
restarted exporter repeats at most that much (with the same record ids) and loses nothing.

A row whose insert committed more than `settle_s` after its StoredAt is found by the
recount: every `recheck_every_s` the exporter counts the rows stored in each second of
the last `recheck_window_s` behind its cursor, and a second holding more rows than it read
there is read and sent again (its rows repeat, with their ids). It remembers one count per
second of that window: memory stays bounded, like the pages.

Every text is scrubbed of e-mail addresses and card numbers before it leaves.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from pathgrade.batch_plane.export.config import ExportConfig
from pathgrade.batch_plane.export.otlp_http import LogsEndpoint
from pathgrade.batch_plane.store.client import redact_dsn
from pathgrade.batch_plane.store.results_backlog import (
    SOURCES,
    Cursor,
    ResultsBacklog,
    Source,
    StoredRow,
)
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas.store import Store
from pathgrade.transport.evaluation_records import alert_record, logs_request, score_record

log = logging.getLogger(__name__)

CURSOR_SAVE_S = 2.0
"""How often moved cursors are saved (a crash repeats at most this long of records)."""
RECORD_OVERHEAD_BYTES = 16
"""A record's framing inside a request, added to its own size when cutting requests."""
_NS = 1_000_000_000
_BUILDERS: dict[Source, Callable[..., LogRecord]] = {
    "scores": score_record,
    "alerts": alert_record,
}


@dataclass
class ExportStats:
    """What the exporter did since it started (ints: status and /metrics read them)."""

    exported_scores: int = 0
    exported_alerts: int = 0
    requests: int = 0
    retries: int = 0
    refused: int = 0  # records given up: refused alone with 400/413, or no record fits
    rejected: int = 0  # records a receiver's partial success said it rejected
    resent_late: int = 0  # rows found by the recount, sent after later ones
    failing: int = 0  # 1 while requests keep failing
    latest_error: str = ""


class ResultExporter:
    """Exports `store`'s scores and alerts as `config` says: `start()`, `stop()`;
    `export_once()` does one round on the caller's thread."""

    def __init__(self, config: ExportConfig, store: Store) -> None:
        self.config = config
        self.backlog = ResultsBacklog(store, config.exporter_id, config.tenants, config.text_chars)
        self.endpoint = LogsEndpoint(
            config.url, config.headers, config.timeout_s, config.compression
        )
        self.stats = ExportStats()
        self.where = redact_dsn(config.url)
        self._clean = PiiScanner().clean
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cursors: dict[Source, Cursor] = {}
        self._saved: dict[Source, Cursor] = {}
        self._read: dict[Source, dict[int, int]] = {source: {} for source in SOURCES}
        self._counted_from: dict[Source, int] = {}  # first second whose reads are all counted
        self._failing_since: float | None = None

    def start(self) -> None:
        """Take the cursors (`resume`) here unless an earlier round took them, so every row
        stored after `start()` returns is exported, then export on a thread of its own until
        `stop()`; a store that cannot answer yet is asked again by that thread."""
        try:
            if not self._cursors:
                self.resume()
        except Exception as exc:  # the store's QueryError or transport errors
            log.warning("results export: reading the cursors failed: %s; retrying", exc)
        self._thread = threading.Thread(target=self._run, name="results-export", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop after the request under way (its records go again next time if it was not
        acknowledged), save the cursors, close the connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        try:
            self.save_cursors()
        except Exception as exc:  # the store's QueryError or transport errors
            log.warning("results export: saving the cursors failed: %s", exc)
        self.endpoint.close()

    def _run(self) -> None:
        next_save = next_recheck = time.monotonic()
        while not self._stop.is_set():
            try:
                moved = self.export_once()
                now = time.monotonic()
                if self.config.recheck_window_s and now >= next_recheck:
                    next_recheck = now + self.config.recheck_every_s
                    self.recheck()
                if now >= next_save:
                    next_save = now + CURSOR_SAVE_S
                    self.save_cursors()
            except Exception as exc:  # the store's QueryError or transport errors
                log.warning("results export: reading the store failed: %s; retrying", exc)
                self._stop.wait(self.config.poll_s)
                continue
            if not moved:
                self._stop.wait(self.config.poll_s)

    def resume(self) -> None:
        """Take the saved cursors; a source never exported starts at the store's now (rows
        stored from then on), saved at once."""
        saved = self.backlog.cursors()
        fresh = {s: Cursor(self.backlog.now_ns()) for s in SOURCES if s not in saved}
        self._cursors = {**saved, **fresh}
        self._saved = dict(saved)
        for source, cursor in self._cursors.items():
            self._counted_from[source] = cursor.stored_at_ns // _NS + 1
        if fresh:
            self.save_cursors()

    def export_once(self) -> bool:
        """Send one page of each source past its cursor; whether any row was sent."""
        if not self._cursors:
            self.resume()
        upto = self.backlog.now_ns() - int(self.config.settle_s * _NS)
        moved = False
        for source in SOURCES:
            rows = self.backlog.rows_after(
                source, self._cursors[source], upto, self.config.batch_records
            )
            for sent in self._send(source, rows):
                self._cursors[source] = sent[-1].cursor
                self._count(source, sent)
                moved = True
        return moved

    def recheck(self) -> None:
        """Recount the seconds of the window behind each cursor and send again the rows of
        a second that holds more than were read there."""
        for source in SOURCES:
            cursor = self._cursors.get(source)
            if cursor is None:
                continue
            last = cursor.stored_at_ns // _NS - 1  # the cursor's own second is still read
            first = max(self._counted_from[source], last - int(self.config.recheck_window_s))
            read = self._read[source]
            for second in [s for s in read if s < first]:
                del read[second]
            if first > last:
                continue
            stored = self.backlog.counts_by_second(source, first, last)
            for second, count in sorted(stored.items()):
                if count > read.get(second, 0) and not self._resend_second(source, second):
                    return
                read[second] = max(count, read.get(second, 0))

    def _resend_second(self, source: Source, second: int) -> bool:
        """Send every row of `source` stored in `second` (a late one among them); False
        when stopped first."""
        after, end = Cursor(second * _NS - 1), (second + 1) * _NS - 1
        while rows := self.backlog.rows_after(source, after, end, self.config.batch_records):
            for sent in self._send(source, rows):
                after = sent[-1].cursor
                self.stats.resent_late += len(sent)
            if after != rows[-1].cursor:
                return False
        log.warning("results export: %s stored in second %d committed late; sent again",
                    source, second)  # fmt: skip
        return True

    def _count(self, source: Source, rows: list[StoredRow]) -> None:
        read = self._read[source]
        for row in rows:
            second = row.cursor.stored_at_ns // _NS
            read[second] = read.get(second, 0) + 1
        if source == "scores":
            self.stats.exported_scores += len(rows)
        else:
            self.stats.exported_alerts += len(rows)

    def save_cursors(self) -> None:
        """Save the cursors that moved since they were saved last."""
        moved = {s: c for s, c in self._cursors.items() if self._saved.get(s) != c}
        self.backlog.save(moved)
        self._saved.update(moved)

    def _send(self, source: Source, rows: list[StoredRow]) -> Iterator[list[StoredRow]]:
        """Send `rows` as requests of at most `batch_bytes`; yields each request's rows
        once acknowledged (records given up included), in order; stops when stopped."""
        build = _BUILDERS[source]
        batch: list[tuple[StoredRow, LogRecord]] = []
        size = 0
        for row in rows:
            try:
                record = build(row.fields, self._clean)
            except (ValueError, TypeError, KeyError) as exc:  # a row no record can hold
                if batch and not self._deliver(source, batch):
                    return
                yield [r for r, _ in batch] + [row]
                batch, size = [], 0
                self._give_up(source, row.cursor.key, f"not a record: {exc}")
                continue
            record_size = record.ByteSize() + RECORD_OVERHEAD_BYTES
            if batch and size + record_size > self.config.batch_bytes:
                if not self._deliver(source, batch):
                    return
                yield [r for r, _ in batch]
                batch, size = [], 0
            batch.append((row, record))
            size += record_size
        if batch and self._deliver(source, batch):
            yield [r for r, _ in batch]

    def _deliver(self, source: Source, batch: list[tuple[StoredRow, LogRecord]]) -> bool:
        """Send `batch` until the receiver acknowledged it, retrying as long as it takes;
        a refused batch is sent as halves, and a single refused record is given up when
        the endpoint takes an empty request (else the endpoint is what is wrong, and the
        record waits). False when stopped first."""
        request = logs_request((row.fields["Tenant"], record) for row, record in batch)
        attempt = 0
        while not self._stop.is_set():
            answer = self.endpoint.send(request)
            self.stats.requests += 1
            if answer.outcome == "delivered":
                self._recovered()
                if answer.rejected:
                    self.stats.rejected += answer.rejected
                    log.warning("results export to %s: the receiver rejected %d of %d %s "
                                "records: %s", self.where, answer.rejected, len(batch), source,
                                answer.reason)  # fmt: skip
                return True
            reason = answer.reason
            if answer.outcome == "refused":
                if len(batch) > 1:
                    middle = len(batch) // 2
                    return self._deliver(source, batch[:middle]) and self._deliver(
                        source, batch[middle:]
                    )
                if self._takes_empty_request():
                    self._recovered()
                    self._give_up(source, batch[0][0].cursor.key, reason)
                    return True
                reason += " (an empty request is refused too: is this an OTLP logs endpoint?)"
            self._failing(reason)
            self.stats.retries += 1
            delay = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
            delay *= random.uniform(0.5, 1.5)
            if answer.retry_after_s is not None:
                delay = max(delay, min(answer.retry_after_s, self.config.max_backoff_s))
            attempt += 1
            self._stop.wait(delay)
        return False

    def _takes_empty_request(self) -> bool:
        """Whether the endpoint acknowledges a request without records."""
        self.stats.requests += 1
        return self.endpoint.send(ExportLogsServiceRequest()).outcome == "delivered"

    def _give_up(self, source: Source, key: str, reason: str) -> None:
        self.stats.refused += 1
        log.error("results export to %s: %s record %s given up: %s", self.where,
                  source, key, reason)  # fmt: skip

    def _failing(self, reason: str) -> None:
        self.stats.latest_error = reason
        if self._failing_since is None:
            self._failing_since = time.monotonic()
            self.stats.failing = 1
            log.warning("results export to %s failing (%s); retrying until it answers, "
                        "nothing is dropped", self.where, reason)  # fmt: skip

    def _recovered(self) -> None:
        if self._failing_since is not None:
            log.warning("results export to %s answers again after %.0f s", self.where,
                        time.monotonic() - self._failing_since)  # fmt: skip
            self._failing_since = None
            self.stats.failing = 0
