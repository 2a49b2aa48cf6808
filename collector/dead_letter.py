"""The spill's dead-letter file: what the drainer moved aside instead of retrying it.

A spilled message that Kafka refuses for the message itself (too large, an invalid or
corrupt record: `REFUSED_MESSAGE_ERRORS` in `collector.publisher`) would be refused again
on every retry, and would hold up everything spilled after it. So would a spill frame that
cannot be read back. Both are appended here, fsynced, with the reason, and the drainer goes
on with the rest. Nothing is dropped: the entries stay until someone deletes the file or
re-drives them into the spill (`pathgrade dead-letter --redrive`, with the collector
stopped), for example after raising the broker's `message.max.bytes`.

The file is `dead-letter.log` in the spill directory. Each entry is a frame: a 4-byte
big-endian length, then a 2-byte reason length, the reason (UTF-8) and the spill frame's
body (`collector.spill.encode_body`; for an unreadable frame, its raw bytes).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from pathgrade.collector.spill import OutgoingMessage, SpillFile, decode_message

DEAD_LETTER_FILE = "dead-letter.log"
_FRAME = struct.Struct(">I")
_REASON = struct.Struct(">H")
_MAX_REASON_BYTES = 2000


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One moved-aside entry: why, and the spill frame body it came from."""

    reason: str
    body: bytes

    def message(self) -> OutgoingMessage | None:
        """The spilled message, or None for a frame that never was one."""
        try:
            return decode_message(self.body)
        except ValueError:
            return None


def encode_entry(entry: DeadLetter) -> bytes:
    reason = entry.reason.encode()[:_MAX_REASON_BYTES]
    body = _REASON.pack(len(reason)) + reason + entry.body
    return _FRAME.pack(len(body)) + body


def read_entries(path: Path) -> Iterator[DeadLetter]:
    """The entries of a dead-letter file, in the order they were moved aside (a torn
    final frame, from a crash mid-append, is not an entry)."""
    if not path.exists():
        return
    with open(path, "rb") as data:
        while len(header := data.read(_FRAME.size)) == _FRAME.size:
            (length,) = _FRAME.unpack(header)
            frame = data.read(length)
            if len(frame) < max(length, _REASON.size):
                return
            (reason_length,) = _REASON.unpack_from(frame)
            reason_end = _REASON.size + reason_length
            yield DeadLetter(frame[_REASON.size : reason_end].decode(errors="replace"),
                             frame[reason_end:])  # fmt: skip


class DeadLetterFile:
    """Append-only, fsynced; knows how many entries it holds (counted once at open)."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / DEAD_LETTER_FILE
        self._lock = threading.Lock()
        self.entries = sum(1 for _ in read_entries(self.path))

    def append(self, entries: list[DeadLetter]) -> None:
        """Move `entries` aside: appended and fsynced before this returns. Raises OSError
        when the disk refuses them, with what was written of them cut off again (so a
        later append does not follow a torn entry)."""
        if not entries:
            return
        frames = memoryview(b"".join(encode_entry(entry) for entry in entries))
        with self._lock:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                size = os.fstat(descriptor).st_size
                try:
                    while frames:
                        frames = frames[os.write(descriptor, frames) :]
                    os.fsync(descriptor)
                except OSError:
                    with suppress(OSError):
                        os.ftruncate(descriptor, size)
                    raise
            finally:
                os.close(descriptor)
            self.entries += len(entries)


def redrive(directory: str | Path) -> tuple[int, int]:
    """Append every dead-lettered message back to the spill of `directory` (so the
    collector's drainer sends it on its next start) and keep only the entries that are no
    message at all; returns (re-driven, kept). Raises SpillInUse while a collector runs
    on `directory`."""
    spill = SpillFile(directory)  # holds the directory's lock until closed
    try:
        path = Path(directory) / DEAD_LETTER_FILE
        entries = list(read_entries(path))
        messages = [m for m in (entry.message() for entry in entries) if m is not None]
        kept = [entry for entry in entries if entry.message() is None]
        spill.append(messages)
        rewritten = path.with_suffix(".tmp")
        with open(rewritten, "wb") as data:
            data.write(b"".join(encode_entry(entry) for entry in kept))
            data.flush()
            os.fsync(data.fileno())
        os.replace(rewritten, path)
        return len(messages), len(kept)
    finally:
        spill.close()
