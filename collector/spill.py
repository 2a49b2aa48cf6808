"""A bounded, fsynced local log of trace messages: the collector's spill, and in the
embedded stack its durable log.

Messages are appended in order and fsynced before the client is acknowledged; concurrent
appends share one fsync (group commit: an append waits for the fsync under way, then one
of the waiting appends syncs everything written meanwhile). A drainer reads them back in
the same order from a read position kept in memory (`mark_read`); what is done with for
good (in Kafka, or in the durable log's case stored by its readers) is marked drained,
and that position survives restarts (`spill.pos`). Reading stops at what is fsynced, so
nothing reaches Kafka that a crash could still take back.

The log is a run of segment files `spill-<offset>.log`, each named by the log offset of
its first byte (offsets count bytes since the log began and never go back). A collector
appends to a segment of its own (a new one at start, and again past `segment_bytes`), so
it never writes after the torn tail an earlier process may have left, and a segment is
deleted once everything in it is drained. A `spill.log` of an earlier version is the
segment at offset 0.

One process at a time owns a spill directory (an exclusive lock on `spill.lock`), so a
second collector, or `pathgrade dead-letter --redrive` while the collector runs, is
refused instead of corrupting the file. Frames that cannot be read back (a write torn by
a crash, corruption) are handed to the caller as unreadable, to be moved aside
(`collector.dead_letter`), never retried.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import struct
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

_FRAME = struct.Struct(">I")
_HEAD = struct.Struct(">HHQ")  # key length, tenant length, received_at_ns
DEFAULT_SPILL_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_SEGMENT = re.compile(r"spill-(\d{20})\.log")
_LEGACY_FILE = "spill.log"


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One Kafka message of `pathgrade.spans`: the spans of one trace."""

    key: bytes
    value: bytes
    tenant: str
    received_at_ns: int


class SpillFull(Exception):
    """The spill file holds its maximum (or cannot be written); the client must retry later."""

    def __init__(self, reason: str, retry_after_s: int = 5) -> None:
        super().__init__(f"not accepted: {reason}; retry later")
        self.reason = reason
        self.retry_after_s = retry_after_s


class SpillInUse(RuntimeError):
    """Another process owns the spill directory."""


@dataclass(slots=True)
class SpillBatch:
    """Messages read from the spill in order, the frames that could not be read (raw
    bytes, reason), and the log offset after all of them."""

    messages: list[OutgoingMessage] = field(default_factory=list)
    unreadable: list[tuple[bytes, str]] = field(default_factory=list)
    end: int = 0


def encode_body(message: OutgoingMessage) -> bytes:
    """A message as the body of a spill frame (no length prefix)."""
    tenant = message.tenant.encode()
    return (
        _HEAD.pack(len(message.key), len(tenant), message.received_at_ns)
        + message.key
        + tenant
        + message.value
    )


def encode_message(message: OutgoingMessage) -> bytes:
    """A message as one spill frame: a length prefix and the body."""
    body = encode_body(message)
    return _FRAME.pack(len(body)) + body


def decode_message(body: bytes) -> OutgoingMessage:
    """The message of a frame body; ValueError (naming what is wrong) when it is not one."""
    try:
        key_len, tenant_len, received_at = _HEAD.unpack_from(body)
    except struct.error as exc:
        raise ValueError(f"frame of {len(body)} bytes is shorter than its header") from exc
    start = _HEAD.size
    if start + key_len + tenant_len > len(body):
        raise ValueError(f"frame of {len(body)} bytes is shorter than its key and tenant")
    key = body[start : start + key_len]
    tenant = body[start + key_len : start + key_len + tenant_len].decode()  # ValueError
    return OutgoingMessage(key, body[start + key_len + tenant_len :], tenant, received_at)


def logs_spill_dir(spill_dir: Path) -> Path:
    """Where the log records' spill (their durable log) lives: beside the spans'."""
    return spill_dir / "logs"


def lock_directory(directory: Path) -> int:
    """Take the exclusive lock of a spill directory; returns the lock's descriptor.
    Raises SpillInUse when another process holds it."""
    descriptor = os.open(directory / "spill.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(descriptor)
        raise SpillInUse(
            f"the spill directory {directory} is in use by another process (pid {holder}); "
            "stop that collector first"
        ) from exc
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, str(os.getpid()).encode(), 0)
    return descriptor


def segment_name(offset: int) -> str:
    """The file name of the segment whose first byte is at log offset `offset`."""
    return f"spill-{offset:020d}.log"


@dataclass(slots=True)
class _Segment:
    base: int  # log offset of its first byte
    path: Path
    size: int  # bytes of whole frames in it (a torn tail from a crash counts too)

    @property
    def end(self) -> int:
        return self.base + self.size


class SpillFile:
    """Append-only segmented log with an in-memory read position and a persisted drained
    position. `append` returns once its frames are fsynced; at most `max_bytes` may be
    held undrained."""

    def __init__(
        self,
        directory: str | Path,
        max_bytes: int = DEFAULT_SPILL_BYTES,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_descriptor = lock_directory(self.directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._pos_path = self.directory / "spill.pos"
        self._cond = threading.Condition()
        self._segments = self._load_segments()
        self._writer: int | None = None  # descriptor of this process's segment, the last
        self._syncing = False  # an fsync runs outside the lock
        self._generation = 0  # bumped when unsynced frames were cut off after a failure
        self._reader: tuple[Path, BinaryIO] | None = None
        self._written = self._segments[-1].end if self._segments else 0
        self._drained = self._load_position()
        self._saved_position = self._drained
        self._written = max(self._written, self._drained)
        self._synced = self._written  # what earlier processes wrote is on disk
        self._read = self._drained
        self._delete_drained_segments()

    def _load_segments(self) -> list[_Segment]:
        legacy = self.directory / _LEGACY_FILE
        if legacy.exists():
            legacy.rename(self.directory / segment_name(0))
        segments = sorted(
            (
                _Segment(int(match[1]), path, path.stat().st_size)
                for path in self.directory.iterdir()
                if (match := _SEGMENT.fullmatch(path.name))
            ),
            key=lambda segment: segment.base,
        )
        for segment, following in itertools.pairwise(segments):
            # bytes past a failed fsync were given up: the next segment starts before them
            segment.size = min(segment.size, following.base - segment.base)
        return segments

    def _load_position(self) -> int:
        try:
            position = int(self._pos_path.read_text() or 0)
        except FileNotFoundError:
            position = 0
        first = self._segments[0].base if self._segments else position
        return max(position, first)  # segments below it were drained and deleted

    @property
    def size(self) -> int:
        """Bytes in the segment files (readable after `close`)."""
        with self._cond:
            return sum(segment.size for segment in self._segments)

    @property
    def read_position(self) -> int:
        """Log offset the next `read_batch` starts at."""
        with self._cond:
            return self._read

    @property
    def end(self) -> int:
        """Log offset after the last fsynced frame."""
        with self._cond:
            return self._synced

    def pending(self) -> bool:
        """Whether fsynced frames wait past the read position."""
        with self._cond:
            return self._read < self._synced

    def pending_bytes(self) -> int:
        """Bytes appended and not yet read past (for the spill: not yet in Kafka)."""
        with self._cond:
            return self._written - self._read

    def held_bytes(self) -> int:
        """Bytes appended and not yet drained (what the bound counts)."""
        with self._cond:
            return self._written - self._drained

    def paths(self) -> list[Path]:
        """The segment files, oldest first."""
        with self._cond:
            return [segment.path for segment in self._segments]

    def append(self, messages: list[OutgoingMessage]) -> int:
        """Append and fsync (sharing the fsync with concurrent appends); returns the log
        offset after the frames. Raises SpillFull when they would take the log past its
        bound or the disk refuses them (what was written of them is cut off again)."""
        frames = b"".join(encode_message(m) for m in messages)
        with self._cond:
            if self._written - self._drained + len(frames) > self.max_bytes:
                raise SpillFull(f"the local spill is full ({self.max_bytes} bytes)")
            try:
                self._write(frames)
            except OSError as exc:
                raise SpillFull(f"the local spill cannot be written ({exc})") from exc
            mine, generation = self._written, self._generation
            while self._synced < mine:
                if self._generation != generation:
                    raise SpillFull("the local spill cannot be written (fsync failed)")
                if self._syncing:
                    self._cond.wait()
                else:
                    self._sync_written()
            return mine

    def _write(self, frames: bytes) -> None:
        """Write `frames` at the end of this process's segment (a new one first when there
        is none or it is full); on failure cut them off again and raise OSError."""
        segment = self._segments[-1] if self._writer is not None else None
        if segment is None or (segment.size and segment.size + len(frames) > self.segment_bytes):
            segment = self._start_segment()
        assert self._writer is not None
        view = memoryview(frames)
        try:
            while view:
                view = view[os.write(self._writer, view) :]
        except OSError:
            os.ftruncate(self._writer, segment.size)
            raise
        segment.size += len(frames)
        self._written += len(frames)

    def _start_segment(self) -> _Segment:
        """Close this process's segment (fsynced) and open a new one at the end. Raises
        OSError when the disk refuses (an fsync that failed gives the unsynced frames up,
        as `_sync_written` does; a new file whose name cannot be made durable is removed),
        leaving the log as it was."""
        while self._syncing:
            self._cond.wait()
        if self._writer is not None:
            try:
                os.fsync(self._writer)
            except OSError:
                self._give_up_unsynced(self._writer)
                raise
            os.close(self._writer)
            self._writer = None
            self._synced = self._written
            self._cond.notify_all()
        segment = _Segment(self._written, self.directory / segment_name(self._written), 0)
        writer = os.open(segment.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            _fsync_directory(self.directory)  # the new file's name survives a power cut
        except OSError:
            os.close(writer)
            segment.path.unlink(missing_ok=True)
            raise
        self._writer = writer
        self._segments.append(segment)
        return segment

    def _sync_written(self) -> None:
        """Called with the lock held: fsync everything written so far, outside the lock so
        that appends go on meanwhile. On failure the unsynced frames are cut off and every
        append waiting for them fails."""
        assert self._writer is not None
        self._syncing, target, writer = True, self._written, self._writer
        self._cond.release()
        try:
            os.fsync(writer)
            failed = False
        except OSError:
            failed = True
        finally:
            self._cond.acquire()
            self._syncing = False
            self._cond.notify_all()
        if failed:
            self._give_up_unsynced(writer)
        else:
            self._synced = max(self._synced, target)

    def _give_up_unsynced(self, writer: int) -> None:
        """Called with the lock held after an fsync of `writer` (this process's segment)
        failed: cut the frames written since the last good fsync off (every append waiting
        for them fails) and close it; the next append starts a new segment."""
        self._segments[-1].size -= self._written - self._synced
        self._written = self._synced
        self._generation += 1
        with suppress(OSError):
            os.ftruncate(writer, self._segments[-1].size)
        os.close(writer)
        self._writer = None
        self._cond.notify_all()

    def read_batch(self, max_bytes: int = 4 * 1024 * 1024) -> SpillBatch:
        """Frames from the read position up to what is fsynced: up to `max_bytes` of them
        (at least one if any). A frame whose body is not a message is returned as
        unreadable; when no whole frame remains in a segment (a write torn by a crash, or
        a corrupt length) the rest of it is one unreadable entry, as frame boundaries are
        lost from there."""
        with self._cond:
            batch = SpillBatch(end=self._read)
            for segment in self._segments:
                limit = min(segment.end, self._synced)
                if limit <= batch.end:
                    continue
                batch.end = max(batch.end, segment.base)
                if not self._read_segment(segment, limit, batch, max_bytes):
                    break
            return batch

    def _read_segment(
        self, segment: _Segment, limit: int, batch: SpillBatch, max_bytes: int
    ) -> bool:
        """Read frames of `segment` from `batch.end` up to log offset `limit` into `batch`;
        True when it read up to `limit` and the batch may take more."""
        data = self._open_for_reading(segment)
        data.seek(batch.end - segment.base)
        while batch.end < limit:
            if batch.end - self._read >= max_bytes:
                return False
            length = _next_frame_length(data, limit - batch.end)
            if length is None:
                if batch.messages or batch.unreadable:
                    return False  # the next batch starts with it
                data.seek(batch.end - segment.base)
                rest = data.read(limit - batch.end)
                reason = "unreadable spill frames: no whole frame in the last "
                batch.unreadable.append((rest, f"{reason}{len(rest)} bytes"))
                batch.end = limit
                return False
            body = data.read(length)
            try:
                batch.messages.append(decode_message(body))
            except ValueError as exc:
                batch.unreadable.append((body, f"unreadable spill frame: {exc}"))
            batch.end += _FRAME.size + length
        return True

    def _open_for_reading(self, segment: _Segment) -> BinaryIO:
        if self._reader is None or self._reader[0] != segment.path:
            self._close_reader()
            self._reader = (segment.path, open(segment.path, "rb"))  # noqa: SIM115
        return self._reader[1]

    def _close_reader(self) -> None:
        if self._reader is not None:
            self._reader[1].close()
            self._reader = None

    def mark_read(self, position: int) -> None:
        """The drainer is done reading before `position` (kept in memory only)."""
        with self._cond:
            self._read = max(self._read, position)

    def mark_drained(self, position: int) -> None:
        """Everything before `position` is done with for good: delete the segments wholly
        before it (all of them once everything is drained) and persist it (`spill.pos`).
        Raises OSError when the note cannot be written; the position holds in memory all
        the same, and the next call writes it (a crash meanwhile only costs a resend of
        what the note would have let go)."""
        with self._cond:
            self._drained = min(max(self._drained, position), self._written)
            self._read = max(self._read, self._drained)
            self._delete_drained_segments()
            if self._drained == self._saved_position:
                return
            tmp = self._pos_path.with_suffix(".tmp")
            tmp.write_text(str(self._drained))
            os.replace(tmp, self._pos_path)
            self._saved_position = self._drained

    def position_saved(self) -> bool:
        """Whether `spill.pos` holds the drained position (False after a failed write)."""
        with self._cond:
            return self._drained == self._saved_position

    def rewind(self) -> None:
        """Read again from the drained position: what was read past it went to a broker
        that is gone, and must be sent again."""
        with self._cond:
            self._read = self._drained

    def _delete_drained_segments(self) -> None:
        """Delete the segments wholly drained; this process's own one only when everything
        is drained and no fsync runs on it."""
        while self._segments and self._segments[0].end <= self._drained:
            segment = self._segments[0]
            own = self._writer is not None and len(self._segments) == 1
            if own and (self._syncing or self._drained < self._written):
                return
            if own:
                assert self._writer is not None
                os.close(self._writer)
                self._writer = None
            if self._reader is not None and self._reader[0] == segment.path:
                self._close_reader()
            segment.path.unlink(missing_ok=True)
            self._segments.pop(0)

    def close(self) -> None:
        """Close the files and give up the directory's lock (idempotent)."""
        with self._cond:
            while self._syncing:
                self._cond.wait()
            if self._writer is not None:
                os.close(self._writer)
                self._writer = None
            self._close_reader()
        if self._lock_descriptor >= 0:
            os.close(self._lock_descriptor)  # releases the flock
            self._lock_descriptor = -1


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _next_frame_length(data: BinaryIO, remaining: int) -> int | None:
    """Read the next frame's length prefix; None when the `remaining` bytes do not hold
    the whole frame."""
    header = data.read(_FRAME.size)
    if len(header) < _FRAME.size:
        return None
    (length,) = _FRAME.unpack(header)
    return length if _FRAME.size + length <= remaining else None
