"""The spill file: ordered, fsynced, bounded, restart-safe."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.collector.spill import (
    OutgoingMessage,
    SpillFile,
    SpillFull,
    SpillInUse,
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
    batch = spill.read_batch()
    assert [m.tenant for m in batch.messages] == ["tenant-1", "tenant-2", "tenant-3"]
    spill.mark_drained(batch.end)
    assert not spill.pending()
    assert spill.size == 0


def test_size_follows_the_file_and_pending_bytes_answer_after_close(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(n, size=100) for n in range(4)])
    on_disk = (tmp_path / "spill.log").stat().st_size
    assert spill.size == on_disk > 400
    position = spill.read_batch(max_bytes=150).end
    spill.mark_drained(position)
    spill.close()
    assert spill.pending_bytes() == on_disk - position > 0  # a stopped collector's count
    assert SpillFile(tmp_path).size == on_disk  # a restart reads it from the file


def test_partial_drain_survives_restart(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(n, size=100) for n in range(10)])
    first = spill.read_batch(max_bytes=300)
    assert 1 <= len(first.messages) < 10
    spill.mark_drained(first.end)
    spill.close()
    reopened = SpillFile(tmp_path)
    rest = reopened.read_batch().messages
    assert [m.key for m in first.messages + rest] == [message(n).key for n in range(10)]


def test_full_spill_refuses_and_keeps_what_it_holds(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path, max_bytes=500)
    spill.append([message(1, size=200)])
    with pytest.raises(SpillFull) as full:
        spill.append([message(2, size=400)])
    assert full.value.retry_after_s > 0
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-1"]


def test_torn_final_frame_is_handed_out_as_unreadable_after_the_messages(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    spill.close()
    frame = encode_message(message(2))
    with open(tmp_path / "spill.log", "ab") as data:
        data.write(frame[: len(frame) // 2])  # a crash mid-append
    reopened = SpillFile(tmp_path)
    first = reopened.read_batch()
    assert [m.tenant for m in first.messages] == ["tenant-1"] and not first.unreadable
    reopened.mark_drained(first.end)
    tail = reopened.read_batch()
    assert tail.messages == []
    assert tail.unreadable == [(frame[: len(frame) // 2], tail.unreadable[0][1])]
    assert "no whole frame in the last" in tail.unreadable[0][1]
    reopened.mark_drained(tail.end)
    assert not reopened.pending() and reopened.size == 0


def test_a_frame_that_is_no_message_is_unreadable_and_the_rest_is_read(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    spill.close()
    body = b"\0\1\0\4" + bytes(8) + b"k" + b"\xff\xfe\xfd\xfc"  # a tenant that is no UTF-8
    with open(tmp_path / "spill.log", "ab") as data:
        data.write(len(body).to_bytes(4, "big") + body + encode_message(message(3)))
    batch = SpillFile(tmp_path).read_batch()
    assert [m.tenant for m in batch.messages] == ["tenant-1", "tenant-3"]
    assert [raw for raw, _ in batch.unreadable] == [body]
    assert batch.unreadable[0][1].startswith("unreadable spill frame:")


def test_decode_message_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="shorter than its header"):
        decode_message(b"\0\1")
    with pytest.raises(ValueError, match="shorter than its key and tenant"):
        decode_message(b"\0\x09\0\0" + bytes(8) + b"k")


def test_one_process_owns_a_spill_directory(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    with pytest.raises(SpillInUse, match=f"{tmp_path} is in use by another process"):
        SpillFile(tmp_path)
    spill.close()
    SpillFile(tmp_path).close()  # free again once closed
