"""A bounded, fsynced local spill file for messages Kafka could not take.

Messages are appended in order and fsynced before the client is acknowledged; a drainer
reads them back in the same order and marks them drained once Kafka acknowledged them.
The read position survives restarts (`spill.pos`), so a collector restarted while the
broker is away drains what it held before. The file is emptied when fully drained.

One process at a time owns a spill directory (an exclusive lock on `spill.lock`), so a
second collector, or `pathgrade dead-letter --redrive` while the collector runs, is
refused instead of corrupting the file. Frames that cannot be read back (a write torn by
a crash, corruption) are handed to the caller as unreadable, to be moved aside
(`collector.dead_letter`), never retried.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

_FRAME = struct.Struct(">I")
_HEAD = struct.Struct(">HHQ")  # key length, tenant length, received_at_ns
DEFAULT_SPILL_BYTES = 1024 * 1024 * 1024


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
        super().__init__(f"Kafka is unavailable and {reason}; retry later")
        self.retry_after_s = retry_after_s


class SpillInUse(RuntimeError):
    """Another process owns the spill directory."""


@dataclass(slots=True)
class SpillBatch:
    """Messages read from the spill in order, the frames that could not be read (raw
    bytes, reason), and the file position after all of them."""

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


class SpillFile:
    """Append-only spill with a persisted read position."""

    def __init__(self, directory: str | Path, max_bytes: int = DEFAULT_SPILL_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_descriptor = lock_directory(self.directory)
        self.max_bytes = max_bytes
        self._data_path = self.directory / "spill.log"
        self._pos_path = self.directory / "spill.pos"
        self._lock = threading.Lock()
        self._data = open(self._data_path, "ab+")  # noqa: SIM115 (held for the spill's life)
        self._size = os.fstat(self._data.fileno()).st_size  # kept in step by append/drain
        self._read_pos = self._load_position()

    def _load_position(self) -> int:
        try:
            return int(self._pos_path.read_text() or 0)
        except FileNotFoundError:
            return 0

    @property
    def size(self) -> int:
        """Bytes in the spill file (readable after `close`)."""
        return self._size

    def pending(self) -> bool:
        with self._lock:
            return self._read_pos < self.size

    def pending_bytes(self) -> int:
        """Bytes spilled and not yet drained to Kafka."""
        with self._lock:
            return self.size - self._read_pos

    def append(self, messages: list[OutgoingMessage]) -> None:
        """Append and fsync; raises SpillFull when it would exceed the bound or the disk
        refuses the write (what was written of it is cut off again)."""
        frames = b"".join(encode_message(m) for m in messages)
        with self._lock:
            if self.size + len(frames) > self.max_bytes:
                raise SpillFull(f"the local spill is full ({self.max_bytes} bytes)")
            try:
                self._data.seek(0, os.SEEK_END)
                self._data.write(frames)
                self._data.flush()
                os.fsync(self._data.fileno())
            except OSError as exc:
                self._data.truncate(self._size)
                raise SpillFull(f"the local spill cannot be written ({exc})") from exc
            self._size = self._data.tell()

    def read_batch(self, max_bytes: int = 4 * 1024 * 1024) -> SpillBatch:
        """Frames from the read position: up to `max_bytes` of them (at least one if any).
        A frame whose body is not a message is returned as unreadable; when no whole frame
        remains (a write torn by a crash, or a corrupt length) the rest of the file is one
        unreadable entry, as frame boundaries are lost from there."""
        with self._lock:
            batch = SpillBatch(end=self._read_pos)
            self._data.seek(batch.end)
            while batch.end < self._size and batch.end - self._read_pos < max_bytes:
                length = self._next_frame_length(self._size - batch.end)
                if length is None:
                    if not (batch.messages or batch.unreadable):  # else: the next batch
                        self._data.seek(batch.end)
                        rest = self._data.read(self._size - batch.end)
                        reason = "unreadable spill frames: no whole frame in the last "
                        batch.unreadable.append((rest, f"{reason}{len(rest)} bytes"))
                        batch.end = self._size
                    break
                body = self._data.read(length)
                try:
                    batch.messages.append(decode_message(body))
                except ValueError as exc:
                    batch.unreadable.append((body, f"unreadable spill frame: {exc}"))
                batch.end += _FRAME.size + length
            return batch

    def _next_frame_length(self, remaining: int) -> int | None:
        """Read the next frame's length prefix; None when the `remaining` bytes of the file
        do not hold the whole frame."""
        header = self._data.read(_FRAME.size)
        if len(header) < _FRAME.size:
            return None
        (length,) = _FRAME.unpack(header)
        return length if _FRAME.size + length <= remaining else None

    def mark_drained(self, position: int) -> None:
        """Everything before `position` is in Kafka; empty the file once all is drained."""
        with self._lock:
            self._read_pos = position
            if position >= self.size:
                self._data.truncate(0)
                self._size = 0
                self._read_pos = 0
            tmp = self._pos_path.with_suffix(".tmp")
            tmp.write_text(str(self._read_pos))
            os.replace(tmp, self._pos_path)

    def close(self) -> None:
        """Close the file and give up the directory's lock (idempotent)."""
        self._data.close()
        if self._lock_descriptor >= 0:
            os.close(self._lock_descriptor)  # releases the flock
            self._lock_descriptor = -1
