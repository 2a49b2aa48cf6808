"""The spill file: ordered, fsynced, bounded, restart-safe."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.collector.spill import (
    OutgoingMessage,
    SpillFile,
    SpillFull,
    decode_message,
    encode_message,
)


def message(n: int, size: int = 10) -> OutgoingMessage:
    return OutgoingMessage(f"{n:032x}".encode(), bytes([n % 256]) * size, f"tenant-{n}", 10**18 + n)


def test_encode_decode_round_trip() -> None:
    original = message(7, size=1000)
    frame = encode_message(original)
    assert decode_message(frame[4:]) == original


def test_read_back_in_order_and_empty_once_drained(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1), message(2)])
    spill.append([message(3)])
    assert spill.pending()
    read, position = spill.read_batch()
    assert [m.tenant for m in read] == ["tenant-1", "tenant-2", "tenant-3"]
    spill.mark_drained(position)
    assert not spill.pending()
    assert spill.size == 0


def test_size_follows_the_file_and_pending_bytes_answer_after_close(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(n, size=100) for n in range(4)])
    on_disk = (tmp_path / "spill.log").stat().st_size
    assert spill.size == on_disk > 400
    _, position = spill.read_batch(max_bytes=150)
    spill.mark_drained(position)
    spill.close()
    assert spill.pending_bytes() == on_disk - position > 0  # a stopped collector's count
    assert SpillFile(tmp_path).size == on_disk  # a restart reads it from the file


def test_partial_drain_survives_restart(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(n, size=100) for n in range(10)])
    first, position = spill.read_batch(max_bytes=300)
    assert 1 <= len(first) < 10
    spill.mark_drained(position)
    spill.close()
    reopened = SpillFile(tmp_path)
    rest, _ = reopened.read_batch()
    assert [m.key for m in first + rest] == [message(n).key for n in range(10)]


def test_full_spill_refuses_and_keeps_what_it_holds(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path, max_bytes=500)
    spill.append([message(1, size=200)])
    with pytest.raises(SpillFull) as full:
        spill.append([message(2, size=400)])
    assert full.value.retry_after_s > 0
    held, _ = spill.read_batch()
    assert [m.tenant for m in held] == ["tenant-1"]


def test_torn_final_frame_is_not_read(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    spill.close()
    frame = encode_message(message(2))
    with open(tmp_path / "spill.log", "ab") as data:
        data.write(frame[: len(frame) // 2])  # a crash mid-append
    read, _ = SpillFile(tmp_path).read_batch()
    assert [m.tenant for m in read] == ["tenant-1"]
