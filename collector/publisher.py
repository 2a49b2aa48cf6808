"""Publishing to Kafka with the guarantee: acknowledged means in Kafka or fsynced locally.

`publish` returns by its deadline: once Kafka acknowledged every message (acks=all), or
with the messages not acknowledged by then fsynced in the spill file. A request thus
waits for Kafka at most `ack_timeout_s` + `MAX_SEND_BLOCK_S` (6 s by default; plus its own
processing and one fsync) whatever the broker does: stalled, unreachable, slow to answer
metadata. While the spill holds anything, new messages go to the spill too, so a trace's
messages keep their order; a drainer thread moves the spill to Kafka when the broker is
back, and starts a new producer when the old one keeps failing (`renew`).

A message Kafka refuses for what it is (`REFUSED_MESSAGE_ERRORS`: too large, an invalid
or corrupt record) would be refused on every retry: `publish` reports it to the caller,
unacknowledged, instead of spilling it, and the drainer moves such a spilled message (and
spill frames it cannot read) to the dead-letter file (`collector.dead_letter`) and goes on
with the rest, so it is never retried ahead of good data.

`hold()` diverts everything to the spill on purpose (the embedded stack does so for the
moment it takes to switch to a fresh broker when it swaps its memory-only one, and while
it replaces one that died) and `resume()` lets the drainer send it on (to a replaced
broker: from where its readers committed, when the old one is lost; with the old one
still being read, the log keeps what went there until `old_broker_read()`).

No failure stops the drainer or the trimmer: a file the disk refuses (the spill or
durable log itself, the dead-letter file, the notes `spill.pos` and `spill.sent`) is
written again after a growing wait (`transport.stalls.Backoff`, up to 10 s), and reported
meanwhile as a stall (`stalls`: what, why; `write_failures`), cleared by the next write
that succeeds. The log's bound and a disk refusing an append answer the request 503 with
`Retry-After`, never dropping what was accepted.

With `committed` (the durable log of the embedded stack, whose broker keeps nothing on
disk) the spill is the acknowledgement: `publish` appends every message to it and returns
once it is fsynced, the drainer sends everything on in order, and a spilled batch is
dropped from the log only once the reader groups have committed past it (`log_trim`):
what a crash takes with the broker is still in the log, and the next collector on the
directory sends it again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaProducer
from kafka.errors import (
    CorruptRecordError,
    InvalidRecordError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
)
from pathgrade.collector.dead_letter import DeadLetter, DeadLetterFile
from pathgrade.collector.limits import PRODUCER_MAX_REQUEST_BYTES
from pathgrade.collector.log_trim import GroupOffsets, SentBatch, TrimQueue, load_sent, save_sent
from pathgrade.collector.partitioner import KeyHashPartitioner
from pathgrade.collector.spill import OutgoingMessage, SpillFile, SpillFull, encode_body
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER
from pathgrade.transport.kafka_settings import kafka_client_settings
from pathgrade.transport.stalls import Backoff, Stalls

log = logging.getLogger(__name__)

REFUSED_MESSAGE_ERRORS: tuple[type[KafkaError], ...] = (
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    InvalidRecordError,
    CorruptRecordError,
)
"""Errors that are about the message itself, so retrying it cannot help. Any other error
(an unreachable broker, a timeout, authorisation) is retried from the spill."""
TRIM_INTERVAL_S = 2.0
"""How often the durable log asks Kafka what its readers committed (the store writer commits
about every 2 s under light traffic: asking every second found nothing new half the time)."""
SENT_NOTE_INTERVAL_S = 1.0
"""While the drainer keeps sending, how often the durable log notes how far it sent
(`save_sent`: a file replaced, ~0.5 ms of CPU); it also notes it once nothing came to
send for `drain_backoff_s`, and when it stops. A collector restarted on the same broker
after a crash sends at most about this much of the log again."""
RENEW_AFTER_FAILED_DRAINS = 3
"""Spilled batches in a row Kafka did not take before the drainer starts a new producer."""
DEAD_LETTER_FILE = "the dead-letter file"
POSITION_NOTE = "the log's position note (spill.pos)"
SENT_NOTE = "the log's sent note (spill.sent)"
"""Stalls of the drainer and the trimmer: which file the disk refused."""
RETIRED_PRODUCER_CLOSE_S = 120.0
"""How long a replaced producer may take to close (its sends to a broker that is gone
give up after `delivery_timeout_ms`, at least 30 s)."""
MAX_SEND_BLOCK_S = 1.0
"""Longest one `send` may block for metadata or buffer space (the producer's
`max_block_ms`, or `ack_timeout_s` when shorter). A request's wait for Kafka is thus at
most `ack_timeout_s` + this."""


def producer_for(bootstrap_servers: str, ack_timeout_s: float, **options: Any) -> KafkaProducer:
    """A producer tuned for trace messages: acks=all, batching, bounded blocking."""
    timeout_ms = int(ack_timeout_s * 1000)
    settings: dict[str, Any] = {
        **kafka_client_settings(bootstrap_servers),
        "acks": "all",
        "linger_ms": 5,
        "batch_size": 512 * 1024,
        "max_request_size": PRODUCER_MAX_REQUEST_BYTES,
        "max_block_ms": int(min(ack_timeout_s, MAX_SEND_BLOCK_S) * 1000),
        "request_timeout_ms": max(timeout_ms, 1000),
        "delivery_timeout_ms": max(30_000, 2 * timeout_ms + 1000),
        "retry_backoff_ms": 200,
        "partitioner": KeyHashPartitioner(),
    }
    settings.update(options)
    return KafkaProducer(**settings)


def refusal_reason(error: KafkaError) -> str | None:
    """Why Kafka refused a message for what it is; None for errors worth retrying."""
    if not isinstance(error, REFUSED_MESSAGE_ERRORS):
        return None
    reason = f"Kafka refused the message ({type(error).__name__}: {error})"
    if isinstance(error, MessageSizeTooLargeError | RecordListTooLargeError):
        reason += "; set max_message_bytes below the broker's message.max.bytes"
    return reason


@dataclass(slots=True)
class _Sent:
    """What one send-and-wait of messages came to."""

    failed: list[int] = field(default_factory=list)  # not acknowledged in time: retry
    refused: dict[int, str] = field(default_factory=dict)  # refused for what they are
    next_offsets: dict[int, int] = field(default_factory=dict)  # partition -> after the last


class KafkaPublisher:
    """Sends trace messages, falling back to the spill (or, with `committed`, always
    through it: the durable log); tracks produced offsets."""

    def __init__(
        self,
        producer: KafkaProducer,
        spill: SpillFile,
        topic: str = SPANS_TOPIC,
        ack_timeout_s: float = 5.0,
        drain_backoff_s: float = 1.0,
        dead_letters: DeadLetterFile | None = None,
        renew: Callable[[], KafkaProducer] | None = None,
        committed: GroupOffsets | None = None,
    ) -> None:
        self.producer = producer
        self.renew = renew
        self.committed = committed  # the readers' committed offsets: a durable log
        self.trim = TrimQueue()
        self._cluster_id: str | None = None  # of the broker the log is sent to, once known
        self._unsaved_note: tuple[str, SentBatch] | None = None  # the drainer's, newest
        self._note_saved_at = 0.0  # monotonic seconds of the last `save_sent`
        self._failed_drains = 0  # batches in a row the broker did not take
        self.stalls = Stalls()
        self._retry = Backoff()  # the drainer's, after a write the disk refused
        self.spill = spill
        self.dead_letters = dead_letters or DeadLetterFile(spill.directory)
        self.topic = topic
        self.ack_timeout_s = ack_timeout_s
        self.drain_backoff_s = drain_backoff_s
        self.next_offsets: dict[int, int] = {}  # partition -> offset after the last acked
        self._offsets_lock = threading.Lock()
        self._held = False
        self._old_broker_unread = False  # resumed with `keep_old`: trims wait for it
        self._old_broker_end: int | None = None  # the log offset after what went there
        self._sending = 0  # publish/drain calls talking to Kafka right now
        self._sending_done = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._drainer = threading.Thread(target=self._drain_loop, name="spill-drainer", daemon=True)
        self._trimmer = threading.Thread(target=self._trim_loop, name="log-trimmer", daemon=True)

    @property
    def durable(self) -> bool:
        """Whether every message goes through the log, kept until its readers committed."""
        return self.committed is not None

    @property
    def log_name(self) -> str:
        """What the spill is called in stalls and errors (with its topic, but for spans')."""
        name = "the durable log" if self.durable else "the spill"
        return name if self.topic == SPANS_TOPIC else f"{name} of {self.topic}"

    def start(self) -> None:
        if self.durable:
            self._skip_what_the_broker_holds()
            self._trimmer.start()
        self._drainer.start()
        if self.spill.pending():
            self._wake.set()

    def publish(
        self, messages: list[OutgoingMessage], deadline: float | None = None
    ) -> dict[int, str]:
        """Return by `deadline` (monotonic seconds; default `ack_timeout_s` from now) once
        every message is acked by Kafka or fsynced, except those Kafka refused for what
        they are: their indexes in `messages`, with the reason, neither acknowledged nor
        spilled. Raises SpillFull."""
        if not messages:
            return {}
        if self.durable:
            self._append(messages)
            self._wake.set()
            return {}
        if not self._begin_sending():
            self._append(messages)
            return {}
        try:
            if self.spill.pending():
                self._append(messages)
                self._wake.set()
                return {}
            if deadline is None:
                deadline = time.monotonic() + self.ack_timeout_s
            sent = self._send_and_wait(messages, deadline)
            if sent.failed:
                log.warning(
                    "Kafka did not acknowledge %d messages; spilling them", len(sent.failed)
                )
                self._append([messages[i] for i in sent.failed])
                self._wake.set()
            return sent.refused
        finally:
            self._end_sending()

    def _append(self, messages: list[OutgoingMessage]) -> None:
        """Append to the spill (fsynced); SpillFull, reported as a stall of the log until an
        append succeeds again, when it is at its bound or the disk refuses."""
        try:
            self.spill.append(messages)
        except SpillFull as exc:
            if self.stalls.failed(self.log_name, exc.reason):
                log.error("%s refuses requests (503): %s", self.log_name, exc.reason)
            raise
        if self.stalls.cleared(self.log_name):
            log.warning("%s accepts requests again", self.log_name)

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Around a write of file `what` by the drainer or the trimmer: an OSError is
        reported as a stall of `what` (logged once) and raised as _Stalled; a success
        clears it."""
        try:
            yield
        except OSError as exc:
            if self.stalls.failed(what, str(exc)):
                log.error("%s cannot be written, retrying: %s", what, exc)
            raise _Stalled(what) from exc
        if self.stalls.cleared(what):
            log.warning("%s written again", what)

    def _begin_sending(self) -> bool:
        """Register a call that will talk to Kafka; False while held (spill instead)."""
        with self._sending_done:
            if self._held:
                return False
            self._sending += 1
            return True

    def _end_sending(self) -> None:
        with self._sending_done:
            self._sending -= 1
            self._sending_done.notify_all()

    def hold(self, timeout_s: float = 60.0) -> dict[int, int] | None:
        """Send nothing more to Kafka: wait for the sends under way, then return the
        produced offsets (partition -> next offset); None when sends were still under way
        after `timeout_s` (the offsets are not final then). Until `resume()`, publish()
        only spills."""
        with self._sending_done:
            self._held = True
            settled = self._sending_done.wait_for(lambda: self._sending == 0, timeout=timeout_s)
        return self.produced_offsets() if settled else None

    def resume(
        self, producer: KafkaProducer | None = None, lost: bool = False, keep_old: bool = False
    ) -> None:
        """Undo `hold()`: the drainer sends what was spilled meanwhile, in order. Pass a
        new `producer` when the broker was replaced (an idempotent producer's id means
        nothing to a new broker). Swapped (`lost` False): its readers read everything the
        old one took, so the durable log lets that go; with `keep_old` they are still
        reading it, and the log keeps it (trimming nothing) until `old_broker_read()`.
        `lost` (it died): the log is sent again from where every reader committed, and
        nothing is let go for the old one."""
        with self._sending_done:
            if producer is not None:
                _close_quietly(self.producer)
                self.producer = producer
                with self._offsets_lock:
                    self.next_offsets = {}  # the new broker numbers its log from 0
                read = self.trim.everything()
                self._unsaved_note = None  # about the old broker
                self._old_broker_unread = keep_old and not lost
                self._old_broker_end = read if self._old_broker_unread else None
                if lost:
                    self.spill.rewind()
                elif read is not None and not keep_old:
                    self._let_go(read)
                self._cluster_id = None  # asked again of the new broker
            self._held = False
        self._wake.set()

    def old_broker_read(self) -> None:
        """The readers of the broker this sent to before `resume(keep_old=True)` read it
        to its end: let go of what went there, and trim as before."""
        with self._sending_done:
            end, self._old_broker_end = self._old_broker_end, None
            if end is not None:
                self._let_go(end)
            self._old_broker_unread = False

    def _let_go(self, position: int) -> None:
        """`spill.mark_drained(position)`; a note the disk refuses is a stall, written
        again by the trimmer or the drainer (the position holds in memory meanwhile)."""
        with suppress(_Stalled), self._writing(POSITION_NOTE):
            self.spill.mark_drained(position)

    def _send_and_wait(self, messages: list[OutgoingMessage], deadline: float) -> _Sent:
        """Send all, wait for acks until `deadline`; returns the indexes of the messages
        not acknowledged in time (to spill or retry), of those Kafka refused (with the
        reason), and the offsets after the acknowledged ones. Sending stops at the deadline
        or when a send blocked (no metadata, a full buffer: the rest would block too), so
        this returns at most one blocked send (MAX_SEND_BLOCK_S) after `deadline`."""
        futures = []
        sent = _Sent()
        for index, message in enumerate(messages):
            if time.monotonic() >= deadline:
                sent.failed.extend(range(index, len(messages)))
                break
            try:
                futures.append((index, self._send(message)))
            except KafkaTimeoutError:
                sent.failed.extend(range(index, len(messages)))
                break
            except KafkaError as exc:
                _sort_failure(index, exc, sent)
        for index, future in futures:
            try:
                metadata = future.get(timeout=max(0.0, deadline - time.monotonic()))
            except KafkaError as exc:
                _sort_failure(index, exc, sent)
                continue
            self._record(metadata.partition, metadata.offset)
            after = metadata.offset + 1
            if after > sent.next_offsets.get(metadata.partition, 0):
                sent.next_offsets[metadata.partition] = after
        sent.failed.sort()
        return sent

    def _send(self, message: OutgoingMessage) -> Any:
        headers = [
            (TENANT_HEADER, message.tenant.encode()),
            (RECEIVED_AT_HEADER, str(message.received_at_ns).encode()),
        ]
        return self.producer.send(self.topic, key=message.key, value=message.value, headers=headers)

    def _record(self, partition: int, offset: int) -> None:
        with self._offsets_lock:
            if offset + 1 > self.next_offsets.get(partition, 0):
                self.next_offsets[partition] = offset + 1

    def partition_count(self) -> int | None:
        """How many partitions `topic` has, as the producer's metadata knows it (read, never
        waited for: None until the producer first learned it, on its first send)."""
        # kafka-python answers this without waiting only from its metadata (`partitions_for`
        # may block for it): read that, through the producer's own attribute.
        partitions = self.producer._metadata.partitions_for_topic(self.topic)
        return len(partitions) if partitions else None

    def produced_offsets(self) -> dict[int, int]:
        """Partition -> next offset after everything this publisher had acknowledged."""
        with self._offsets_lock:
            return dict(self.next_offsets)

    def _drain_loop(self) -> None:
        """Drain until stopped. Nothing ends it (a drainer that died would leave the spill
        unsent for good): a batch Kafka did not take is sent again after
        `drain_backoff_s`; a file the disk refused, after a growing wait; an unexpected
        error is logged and the batch tried again later."""
        while not self._stop.is_set():
            if not self._wake.wait(timeout=self.drain_backoff_s):
                self._save_notes()  # idle for a while: note how far the log was sent
            self._wake.clear()
            while self.spill.pending() and not self._stop.is_set() and self._begin_sending():
                try:
                    sent: bool | None = self._drain_batch()
                except _Stalled:
                    sent = None  # the disk, not Kafka: no new producer for it
                except Exception:
                    log.exception("draining the spill failed; trying again")
                    sent = False
                finally:
                    self._end_sending()
                if sent is None:
                    self._stop.wait(self._retry.next_s())
                    break
                self._retry.reset()
                self._failed_drains = 0 if sent else self._failed_drains + 1
                if not sent:
                    self._renew_after_failures()
                    self._stop.wait(self.drain_backoff_s)  # broker still away: retry later
                    break
        self._save_notes()

    def _renew_after_failures(self) -> None:
        """After RENEW_AFTER_FAILED_DRAINS failed batches in a row, replace the producer
        (when a `renew` factory was given): a producer can fail for good, as when the broker
        was replaced by one that does not know its idempotent producer id. While the spill
        holds anything only the drainer uses the producer, so it is swapped safely here."""
        if self.renew is None or self._failed_drains < RENEW_AFTER_FAILED_DRAINS:
            return
        self._failed_drains = 0
        try:
            fresh = self.renew()
        except KafkaError as exc:
            log.warning("Kafka still unreachable, keeping the producer: %s", exc)
            return
        log.warning("Kafka took no spilled batch %d times in a row; new producer",
                    RENEW_AFTER_FAILED_DRAINS)  # fmt: skip
        _close_quietly(self.producer)
        self.producer = fresh

    def _drain_batch(self) -> bool:
        """Send one batch of the spill on; True once all of it is in Kafka or moved to the
        dead-letter file (then it is marked drained), False to retry it later."""
        batch = self.spill.read_batch()
        sent = self._send_and_wait(batch.messages, time.monotonic() + self.ack_timeout_s)
        if sent.failed:
            return False
        dead = [DeadLetter(reason, body) for body, reason in batch.unreadable]
        dead += [
            DeadLetter(reason, encode_body(batch.messages[index]))
            for index, reason in sent.refused.items()
        ]
        if dead:
            with self._writing(DEAD_LETTER_FILE):
                self.dead_letters.append(dead)
            log.error(
                "moved %d spilled entries Kafka refused or that cannot be read to %s: %s",
                len(dead), self.dead_letters.path, dead[0].reason,
            )  # fmt: skip
        if self.durable:  # kept until its readers committed it
            self.spill.mark_read(batch.end)
            self.trim.sent(batch.end, sent.next_offsets)
            cluster = self._known_cluster()
            if cluster:
                self._unsaved_note = (cluster, SentBatch(batch.end, self.produced_offsets()))
                if time.monotonic() - self._note_saved_at >= SENT_NOTE_INTERVAL_S:
                    with suppress(_Stalled):  # optional: tried again, sending goes on
                        self._save_note()
        else:
            with self._writing(POSITION_NOTE):
                self.spill.mark_drained(batch.end)
            log.info(
                "drained %d spilled messages to Kafka", len(batch.messages) - len(sent.refused)
            )
        return True

    def _save_note(self) -> None:
        """Note (`save_sent`) how far the drainer sent the log, if not noted yet; raises
        _Stalled when the disk refuses (the note waits for the next call)."""
        if self._unsaved_note is not None:
            with self._writing(SENT_NOTE):
                save_sent(self.spill.directory, *self._unsaved_note)
            self._unsaved_note = None
            self._note_saved_at = time.monotonic()

    def _save_notes(self) -> None:
        """The drainer's idle and last step: write the notes not written yet (how far the
        log was sent, how far it was drained: after a failed write, again)."""
        with suppress(_Stalled):
            self._save_note()
        if not self.spill.position_saved():
            self._let_go(0)

    def _skip_what_the_broker_holds(self) -> None:
        """A restart on a broker that lives on (the cluster id of the last `save_sent`):
        start sending where the last collector stopped, and let that part of the log go
        once its readers committed it."""
        sent = load_sent(self.spill.directory, self._known_cluster() or "")
        if sent is not None and self.spill.read_position <= sent.end <= self.spill.end:
            self.spill.mark_read(sent.end)
            self.trim.sent(sent.end, sent.next_offsets)
            with self._offsets_lock:  # what the readers must reach covers the skipped part
                self.next_offsets = dict(sent.next_offsets)

    def _known_cluster(self) -> str | None:
        """The broker's cluster id (asked once per broker); None while it does not answer."""
        if self._cluster_id is None and self.committed is not None:
            try:
                self._cluster_id = self.committed.cluster_id()
            except Exception as exc:  # not known: nothing is skipped or noted meanwhile
                log.debug("reading the cluster id failed: %s", exc)
        return self._cluster_id

    def _trim_loop(self) -> None:
        """Every TRIM_INTERVAL_S, let the log go of the batches every reader committed.
        Nothing ends it: a position note the disk refused is written again on the next
        round, an unexpected error is logged."""
        while not self._stop.wait(TRIM_INTERVAL_S):
            try:
                self._trim()
            except Exception:
                log.exception("trimming the durable log failed; trying again")

    def _trim(self) -> None:
        """One round of `_trim_loop`: let go of what every reader committed (with offsets
        read of the broker the batches went to), or write a position note still owed."""
        assert self.committed is not None
        if self._old_broker_unread:  # what went to it is let go first (`old_broker_read`)
            return
        if self.trim.waiting():
            epoch = self.trim.epoch
            try:
                committed = self.committed()
            except Exception as exc:  # the broker away: the log keeps everything meanwhile
                log.debug("reading the committed offsets failed: %s", exc)
                return
            read = self.trim.trimmable(committed, epoch)
            if read is not None:
                self._let_go(read)
                return
        if not self.spill.position_saved():
            self._let_go(0)

    def close(self, drain_timeout_s: float = 5.0) -> None:
        """Flush the producer, give the drainer a last chance (the durable log: up to
        `drain_timeout_s` for all of it to be in Kafka), stop."""
        self._wake.set()
        deadline = time.monotonic() + drain_timeout_s
        while self.durable and self.spill.pending() and time.monotonic() < deadline:
            self._stop.wait(0.05)
        try:
            self.producer.flush(timeout=drain_timeout_s)
        except KafkaError as exc:
            log.warning("producer flush did not complete: %s", exc)
        self._stop.set()
        self._drainer.join(timeout=drain_timeout_s + self.ack_timeout_s)
        if self.durable:
            self._trimmer.join(timeout=drain_timeout_s + TRIM_INTERVAL_S)
        self.producer.close(timeout=drain_timeout_s)
        self.spill.close()


class _Stalled(Exception):
    """A file the drainer or the trimmer writes was refused by the disk (reported as a
    stall by `KafkaPublisher._writing`)."""


def _close_quietly(producer: KafkaProducer) -> None:
    """Close a producer being replaced without waiting for it: what it still held is in
    the spill and goes through its successor. It closes in a thread of its own once its
    own sends gave up (`delivery_timeout_ms`): kafka-python closes nothing while records
    are pending (its close raises KafkaTimeoutError and leaves its sender thread running)."""

    def close() -> None:
        try:
            producer.close(timeout=RETIRED_PRODUCER_CLOSE_S)
        except KafkaError as exc:
            log.warning("closing a replaced producer: %s", exc)

    threading.Thread(target=close, name="producer-close", daemon=True).start()


def _sort_failure(index: int, error: KafkaError, sent: _Sent) -> None:
    """File a message Kafka did not take under refused (for what it is) or failed."""
    reason = refusal_reason(error)
    if reason is None:
        sent.failed.append(index)
    else:
        sent.refused[index] = reason
