"""The store writer: consumer group `pathgrade-store` copying `pathgrade.spans` into ClickHouse
(and `pathgrade.logs` into its `logs` table: records are decoded here and inserted as rows
with the batch they came in).

Batches are bounded by span count and age: a busy stream is inserted every `max_batch_age_s`
(each chDB insert has a fixed cost of tens of ms, so few large inserts keep up with far more
spans than many small ones), a stream that went quiet after `idle_flush_s` so its last spans
become queryable quickly (unless the previous insert is younger than `max_batch_age_s`: a
light stream of requests with pauses between them is inserted every `max_batch_age_s`, not
once per request), and a stream busy enough for the SQL path every `sql_batch_age_s`
(`flush_due`). A batch of at least `sql_insert_min_spans` spans goes to
ClickHouse as the values came, parsed and computed there (`otlp_insert`): that statement's
analysis costs a fixed share of a second of CPU, which only a large batch earns back, so
smaller batches (an idle or lightly loaded stack's) are decoded here and inserted as rows.
Offsets are committed only after the insert returned, so a crash between the two
re-delivers a batch whose duplicates the ReplacingMergeTree `spans` table absorbs.

Nothing stops the writer: an insert the store refuses (a full disk, a server away) or a
commit Kafka does not take is retried after a growing wait (`transport.stalls.Backoff`, up
to 10 s) with consumption paused, the batch kept as far as it got (rows inserted are not
inserted again when only the commit failed), and reported as a stall (`stalls`) until it
succeeds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kafka import TopicPartition
from pathgrade.batch_plane.store.client import ClientStore, QueryError
from pathgrade.batch_plane.store.log_rows import LOG_COLUMNS, log_row
from pathgrade.batch_plane.store.otlp_insert import (
    PendingMessage,
    create_input_table,
    insert_messages,
    missing_settings,
    pending_message,
)
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.content.otlp import DecodeProblems, decode_resource_spans, message_tenant_and_time
from pathgrade.schemas.decline import declined
from pathgrade.schemas.model import Span
from pathgrade.schemas.store import Store
from pathgrade.transport.consumer import TopicConsumer, decode_records, decode_spans, read_message
from pathgrade.transport.drain import read_until_drained
from pathgrade.transport.message_auth import message_key
from pathgrade.transport.stalls import Backoff, Stalls

log = logging.getLogger(__name__)
_TENANT, _TRACE_ID, _SPAN_ID = (SPAN_COLUMNS.index(c) for c in ("Tenant", "TraceId", "SpanId"))
_LOG_TENANT, _LOG_TRACE_ID = (LOG_COLUMNS.index(c) for c in ("Tenant", "TraceId"))
BUSY_POLL_MS = 100  # a poll's longest wait while a batch is pending (`poll_once`)
IDLE_POLL_MS = 500  # a poll's longest wait while none is
COMMIT_TIMEOUT_MS = 10_000
"""A commit Kafka has not taken by then fails, and is tried again (a broker that died
never answers: the writer must not wait for it for good)."""
STORE = "the store"
COMMITS = "commits to Kafka"
WRITER = "the store writer"
"""Stalls of the store writer: inserts, commits, anything else its polls met."""


@dataclass
class StoreWriterStats:
    messages: int = 0
    spans: int = 0
    inserts: int = 0
    undecodable_messages: int = 0
    rejected_spans: int = 0  # spans the store could not encode (logged, then skipped)
    log_records: int = 0  # log records stored (pathgrade.logs)
    rejected_log_records: int = 0  # records the store could not encode (logged, skipped)
    partly_decoded_spans: int = 0  # stored without their GenAI fields (content.otlp)
    unreadable_headers: int = 0  # messages stored with a default tenant or receive time
    forged_messages: int = 0  # refused: no or a wrong MAC under the stack's message key
    sql_inserts: int = 0  # batches inserted by the store's SQL (`sql_insert_min_spans`)
    python_path_messages: int = 0  # of those batches, outside the SQL: decoded in Python
    declines: dict[str, int] = field(default_factory=dict)  # those by the SQL's reason
    write_failures: int = 0  # inserts and commits that failed (and were tried again)


def _sql_insert_runs(store: ClientStore) -> bool:
    """Whether the store's ClickHouse can run the SQL insert (logged when it cannot): it
    knows the settings the insert needs, and the insert's input table exists or could be
    created (`otlp_insert.input_table`; a user allowed to insert but not to create tables
    gets the Python path)."""
    missing = missing_settings(store)
    if missing:
        log.warning("the store's ClickHouse lacks the settings %s: the store writer "
                    "decodes every batch in Python", ", ".join(missing))  # fmt: skip
        return False
    try:
        create_input_table(store)
    except QueryError as exc:
        log.warning("the store writer cannot create the SQL insert's input table (%s): it "
                    "decodes every batch in Python", exc)  # fmt: skip
        return False
    return True


def _parsed(message: Any, problems: DecodeProblems) -> PendingMessage:
    """A `pathgrade.spans` message parsed for the flush to place (ValueError: undecodable)."""
    tenant, received_at = message_tenant_and_time(message, problems)
    return pending_message(message.value, tenant, received_at)


def flush_due(
    config: StoreWriterConfig,
    spans: int,
    age_s: float,
    quiet_s: float,
    sql: bool,
    since_insert_s: float,
) -> bool:
    """Whether a batch of `spans` spans, its first `age_s` ago and its last `quiet_s` ago,
    the writer's previous insert `since_insert_s` ago, is written now: when full, when no
    message came for `idle_flush_s` and the previous insert is `max_batch_age_s` old (a
    stream of small requests with pauses between them is inserted every `max_batch_age_s`,
    not once per request: each insert has a fixed cost), at `max_batch_age_s`, except (with
    the SQL path) for a batch that has, or at its rate will have by `sql_batch_age_s`,
    `sql_insert_min_spans` spans: that one grows until `sql_batch_age_s`."""
    if spans >= config.max_batch_spans:
        return True
    if quiet_s >= config.idle_flush_s and since_insert_s >= config.max_batch_age_s:
        return True
    if age_s < config.max_batch_age_s:
        return False
    if not sql or age_s >= config.sql_batch_age_s:
        return True
    return spans / age_s * config.sql_batch_age_s < config.sql_insert_min_spans


class _Batch:
    """What is pending insert (rows decoded here, parsed messages whose path the batch's
    size decides at its flush), its spans, and the offsets it covers."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []
        self.log_rows: list[list[Any]] = []
        self.messages: list[PendingMessage] = []
        self.spans = 0
        self.next_offsets: dict[TopicPartition, int] = {}
        self.started = self.last_added = 0.0

    def add(
        self, partition: TopicPartition, offset: int, pending: list[Span] | PendingMessage | None
    ) -> None:
        """Add a message's spans, or the message parsed (None: it was skipped)."""
        self.last_added = time.monotonic()
        if not self.next_offsets:
            self.started = self.last_added
        if isinstance(pending, PendingMessage):
            self.messages.append(pending)
            self.spans += pending.spans
        elif pending:
            self.rows.extend(span_row(span) for span in pending)
            self.spans += len(pending)
        self.next_offsets[partition] = offset + 1


class StoreWriter:
    """Consume, decode, insert, then commit. `run` until `stop` is set."""

    def __init__(self, config: StoreWriterConfig, store: Store) -> None:
        self.config = config
        self.store = store
        self.sql = config.sql_insert and isinstance(store, ClientStore) and _sql_insert_runs(store)
        self.stats = StoreWriterStats()
        self.stalls = Stalls()
        self.abandoned = False  # its broker died: store and commit nothing more
        self.message_key = message_key(config.message_key)
        self._batch = _Batch()
        self._last_insert = float("-inf")  # time.monotonic() of the last flush (`flush_due`)
        self._lock = threading.Lock()
        self.joined = threading.Event()  # set when the group first hands it partitions
        self.consumer = TopicConsumer(
            config.bootstrap_servers, config.group_id, config.topic, config.session_timeout_ms,
            on_revoked=lambda _: self.flush(),  # store and commit before partitions move
            on_assigned=lambda _: self.joined.set(),
            max_poll_records=5000, fetch_max_bytes=64 * 1024 * 1024,
            max_partition_fetch_bytes=16 * 1024 * 1024,
            also=(config.logs_topic,) if config.logs_topic else (), **config.consumer_options,
        )  # fmt: skip

    def run(self, stop: threading.Event, backoff: Backoff | None = None) -> None:
        """Poll and store until `stop`. Whatever fails (the store refusing inserts, a commit
        Kafka did not take, anything else), consumption is paused and the pending batch
        retried after `backoff`'s growing wait, never dropped or committed unstored."""
        self.consumer.run(
            stop, self.poll_once, self._failed, retry=(Exception,),
            retry_s=backoff or Backoff(), pause_while_failing=True,
            recovered=lambda: self._succeeded(WRITER),
        )  # fmt: skip
        self.flush()

    def _failed(self, exc: Exception) -> None:
        """A poll failed: report it as a stall (an insert's or a commit's was already)."""
        if isinstance(exc, _Stalled):
            return
        self.stats.write_failures += 1
        if self.stalls.failed(WRITER, f"{type(exc).__name__}: {exc}"):
            log.exception("the store writer failed; retrying", exc_info=exc)

    def _succeeded(self, what: str) -> None:
        if self.stalls.cleared(what):
            log.warning("%s: the store writer goes on", what)

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Around an insert into `what` or a commit: a failure is counted, reported as a
        stall (logged once) and raised as _Stalled; a success clears the stall."""
        try:
            yield
        except Exception as exc:
            self.stats.write_failures += 1
            if self.stalls.failed(what, str(exc)):
                log.error("%s failed, retrying: %s", what, exc)
            raise _Stalled(what) from exc
        self._succeeded(what)

    def poll_once(self, timeout_ms: int | None = None) -> int:
        """One poll, then a flush when the batch is due (`flush_due`); returns the messages
        read. A poll waits at most `timeout_ms`, by default BUSY_POLL_MS while a batch is
        pending (it falls due by the clock) and IDLE_POLL_MS while none is: nothing falls
        due before a message arrives, and a poll returns as soon as one does."""
        if timeout_ms is None:
            timeout_ms = BUSY_POLL_MS if self._batch.next_offsets else IDLE_POLL_MS
        records = self.consumer.poll(timeout_ms=timeout_ms)
        for partition, messages in records.items():
            for message in messages:
                self._add(partition, message)
        read = sum(map(len, records.values()))
        batch = self._batch
        if not batch.next_offsets:
            return read
        now = time.monotonic()
        age_s, quiet_s = now - batch.started, now - batch.last_added
        if flush_due(self.config, batch.spans, age_s, quiet_s, self.sql, now - self._last_insert):
            self.flush()
        return read

    def _add(self, partition: TopicPartition, message: Any) -> None:
        """Decode the message (no SQL path), or parse it and keep it for the flush, which
        decides its path: either way a malformed value is skipped here, counted, and never
        reaches, or fails, a batch insert."""
        self.stats.messages += 1
        key = self.message_key
        if partition.topic == self.config.logs_topic:
            records = decode_records(partition, message, self.stats, key)
            self._batch.log_rows.extend(log_row(record) for record in records)
            self._batch.add(partition, message.offset, None)
            return
        if not self.sql:
            spans = decode_spans(partition, message, self.stats, key)
            self._batch.add(partition, message.offset, spans)
            return
        pending = read_message(partition, message, self.stats, _parsed, key)
        self._batch.add(partition, message.offset, pending)

    def flush(self) -> None:
        """Insert the pending rows, then commit the offsets they cover. A failure raises
        _Stalled with the batch kept as far as it got: a retry inserts only what was not
        inserted, and commits."""
        with self._lock:
            batch = self._batch
            if not batch.next_offsets or self.abandoned:
                return
            with self._writing(STORE):
                if batch.messages:
                    self._store_messages(batch)
                if batch.rows:
                    self._insert(batch.rows)
                    batch.rows = []
                if batch.log_rows:
                    self._insert_logs(batch.log_rows)
                    batch.log_rows = []
            with self._writing(COMMITS):
                self.consumer.commit(batch.next_offsets, COMMIT_TIMEOUT_MS)
            self._batch = _Batch()
            self._last_insert = time.monotonic()

    def _store_messages(self, batch: _Batch) -> None:
        """Insert the batch's parsed messages with the store's SQL when the batch has at
        least `sql_insert_min_spans` spans; the messages the SQL declines
        (`insert_messages`) and every message of a smaller batch become rows of the batch,
        decoded here: the one place the slow twin is chosen. An insert that fails leaves
        the batch as it was."""
        python = batch.messages
        if batch.spans >= self.config.sql_insert_min_spans:
            answers = insert_messages(self.store, python)
            inserted = [answer for answer in answers if not declined(answer)]
            self.stats.sql_inserts += bool(inserted)
            self.stats.inserts += bool(inserted)
            self.stats.spans += sum(inserted)
            refused = [(m, a) for m, a in zip(python, answers, strict=True) if declined(a)]
            python = [message for message, _ in refused]
            self.stats.python_path_messages += len(python)
            declines = self.stats.declines
            for _, answer in refused:
                declines[answer.reason] = declines.get(answer.reason, 0) + 1
        batch.rows.extend(span_row(span) for message in python for span in self._decoded(message))
        batch.messages = []

    def _decoded(self, message: PendingMessage) -> list[Span]:
        """The spans of a parsed message, decoded in Python."""
        problems = DecodeProblems()
        spans = decode_resource_spans(
            message.traces.resource_spans, message.tenant, message.received_at_ns, problems
        )
        self.stats.partly_decoded_spans += problems.partly_decoded_spans
        return spans

    def _insert(self, rows: list[list[Any]]) -> None:
        """Insert `rows`; spans the store cannot encode (a value outside its column's
        range, from a producer pathgrade's collector did not validate) are logged, counted
        and left out, so one bad span never holds up the stream. Other errors propagate
        (the batch is retried)."""
        rejected = self.store.insert_encodable("spans", rows, list(SPAN_COLUMNS))
        for row, reason in rejected:
            self.stats.rejected_spans += 1
            log.error(
                "span %s/%s of tenant %s cannot be stored, skipped: %s",
                row[_TRACE_ID], row[_SPAN_ID], row[_TENANT], reason,
            )  # fmt: skip
        self.stats.inserts += 1
        self.stats.spans += len(rows) - len(rejected)

    def _insert_logs(self, rows: list[list[Any]]) -> None:
        """Insert log rows; those the store cannot encode are logged, counted, left out."""
        rejected = self.store.insert_encodable("logs", rows, list(LOG_COLUMNS))
        for row, reason in rejected:
            self.stats.rejected_log_records += 1
            log.error("a log record of trace %s of tenant %s cannot be stored, skipped: %s",
                      row[_LOG_TRACE_ID], row[_LOG_TENANT], reason)  # fmt: skip
        self.stats.inserts += 1
        self.stats.log_records += len(rows) - len(rejected)

    def caught_up(self, targets: dict[int, int], topic: str | None = None) -> bool:
        """Whether every partition's position has passed `targets` (partition -> next
        offset) on `topic` (default: the spans' topic)."""
        topic = topic or self.config.topic
        assigned = {tp.partition: tp for tp in self.consumer.assignment() if tp.topic == topic}
        for partition, target in targets.items():
            tp = assigned.get(partition)
            if tp is None or self.consumer.position(tp) < target:
                return False
        return True

    def drain_to(self, targets: dict[int, int], timeout_s: float, idle_s: float = 0.0) -> bool:
        """Consume until `targets` are reached, then (with `idle_s`) on until nothing new
        came for `idle_s`, so messages of other producers are not left behind; flush.
        Gives up at `timeout_s`; True when the targets were reached."""
        read_until_drained(
            lambda: self.poll_once(BUSY_POLL_MS),  # a drain notices quiet at this pace
            # draining what others wrote needs partitions first (a new member joins late)
            lambda: self.caught_up(targets) and (not idle_s or bool(self.consumer.assignment())),
            timeout_s,
            idle_s,
        )
        self.flush()
        return self.caught_up(targets)

    def close(self) -> None:
        self.flush()
        self.consumer.close()


class _Stalled(Exception):
    """An insert or a commit failed (reported as a stall by `StoreWriter._writing`)."""
