"""A bounded, fsynced local spill file for messages Kafka could not take.

Messages are appended in order and fsynced before the client is acknowledged; a drainer
reads them back in the same order and marks them drained once Kafka acknowledged them.
The read position survives restarts (`spill.pos`), so a collector restarted while the
broker is away drains what it held before. The file is emptied when fully drained.
"""

from __future__ import annotations

import os
import struct
import threading
from dataclasses import dataclass
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
    """The spill file holds its maximum; the client must retry later."""

    def __init__(self, max_bytes: int, retry_after_s: int = 5) -> None:
        super().__init__(
            f"Kafka is unavailable and the local spill is full ({max_bytes} bytes); retry later"
        )
        self.retry_after_s = retry_after_s


def encode_message(message: OutgoingMessage) -> bytes:
    tenant = message.tenant.encode()
    body = (
        _HEAD.pack(len(message.key), len(tenant), message.received_at_ns)
        + message.key
        + tenant
        + message.value
    )
    return _FRAME.pack(len(body)) + body


def decode_message(body: bytes) -> OutgoingMessage:
    key_len, tenant_len, received_at = _HEAD.unpack_from(body)
    start = _HEAD.size
    key = body[start : start + key_len]
    tenant = body[start + key_len : start + key_len + tenant_len].decode()
    return OutgoingMessage(key, body[start + key_len + tenant_len :], tenant, received_at)


class SpillFile:
    """Append-only spill with a persisted read position."""

    def __init__(self, directory: str | Path, max_bytes: int = DEFAULT_SPILL_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
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
        """Append and fsync; raises SpillFull when it would exceed the bound."""
        frames = b"".join(encode_message(m) for m in messages)
        with self._lock:
            if self.size + len(frames) > self.max_bytes:
                raise SpillFull(self.max_bytes)
            self._data.seek(0, os.SEEK_END)
            self._data.write(frames)
            self._data.flush()
            os.fsync(self._data.fileno())
            self._size = self._data.tell()

    def read_batch(self, max_bytes: int = 4 * 1024 * 1024) -> tuple[list[OutgoingMessage], int]:
        """Messages from the read position (at least one if any), and the position after."""
        with self._lock:
            position = self._read_pos
            self._data.seek(position)
            messages: list[OutgoingMessage] = []
            read = 0
            while read < max_bytes or not messages:
                header = self._data.read(_FRAME.size)
                if len(header) < _FRAME.size:
                    break
                (length,) = _FRAME.unpack(header)
                body = self._data.read(length)
                if len(body) < length:  # a torn final frame from a crash mid-append
                    break
                messages.append(decode_message(body))
                read += _FRAME.size + length
            return messages, position + read

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
        self._data.close()
