"""The spill log: ordered, fsynced (one fsync for concurrent appends), bounded, in
segments deleted once drained, restart-safe."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from pathgrade.collector import spill as spill_module
from pathgrade.collector.spill import (
    OutgoingMessage,
    SpillFile,
    SpillFull,
    SpillInUse,
    decode_message,
    encode_message,
    segment_name,
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
    assert spill.size == 0 and spill.paths() == []  # the segment is deleted
    spill.append([message(4)])  # a new segment at the offset reached, never back at 0
    assert spill.paths() == [tmp_path / segment_name(batch.end)]
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-4"]


def test_size_follows_the_files_and_pending_bytes_answer_after_close(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(n, size=100) for n in range(4)])
    on_disk = sum(path.stat().st_size for path in spill.paths())
    assert spill.size == on_disk > 400
    position = spill.read_batch(max_bytes=150).end
    spill.mark_drained(position)
    spill.close()
    assert spill.pending_bytes() == on_disk - position > 0  # a stopped collector's count
    assert SpillFile(tmp_path).size == on_disk  # a restart reads it from the files


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


def test_read_is_kept_in_memory_and_only_drained_survives_a_restart(tmp_path: Path) -> None:
    """The durable log reads (sends) ahead of what it may drop: a restart reads again from
    what was drained, not from what was read."""
    spill = SpillFile(tmp_path)
    spill.append([message(1), message(2)])
    first = spill.read_batch()
    spill.mark_read(first.end)
    assert not spill.pending() and spill.pending_bytes() == 0
    assert spill.held_bytes() == first.end
    spill.close()
    again = SpillFile(tmp_path)
    assert [m.tenant for m in again.read_batch().messages] == ["tenant-1", "tenant-2"]


def test_segments_roll_and_are_deleted_once_drained(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path, segment_bytes=250)
    for n in range(6):
        spill.append([message(n, size=100)])  # ~170 bytes a frame: one per segment
    assert len(spill.paths()) == 6
    batch = spill.read_batch()
    assert [m.key for m in batch.messages] == [message(n).key for n in range(6)]
    frame = len(encode_message(message(0, size=100)))
    spill.mark_drained(3 * frame)
    assert [p.name for p in spill.paths()] == [segment_name(n * frame) for n in range(3, 6)]
    spill.close()
    reopened = SpillFile(tmp_path)  # the drained position and the segments left agree
    assert [m.key for m in reopened.read_batch().messages] == [message(n).key for n in (3, 4, 5)]


def test_a_restart_writes_a_segment_of_its_own_after_a_torn_tail(tmp_path: Path) -> None:
    """A crash mid-append leaves a torn frame; the next process never appends after it, so
    what it appends is read whole after the torn bytes are handed out as unreadable."""
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    [segment] = spill.paths()
    spill.close()
    frame = encode_message(message(2))
    with open(segment, "ab") as data:
        data.write(frame[: len(frame) // 2])
    reopened = SpillFile(tmp_path)
    reopened.append([message(3)])
    assert len(reopened.paths()) == 2
    first = reopened.read_batch()
    assert [m.tenant for m in first.messages] == ["tenant-1"] and not first.unreadable
    reopened.mark_drained(first.end)
    torn = reopened.read_batch()
    assert torn.messages == [] and torn.unreadable[0][0] == frame[: len(frame) // 2]
    assert "no whole frame in the last" in torn.unreadable[0][1]
    reopened.mark_drained(torn.end)
    assert [m.tenant for m in reopened.read_batch().messages] == ["tenant-3"]


def test_a_spill_log_of_an_earlier_version_is_read_from_its_position(tmp_path: Path) -> None:
    frames = b"".join(encode_message(message(n)) for n in range(3))
    (tmp_path / "spill.log").write_bytes(frames)
    first = len(encode_message(message(0)))
    (tmp_path / "spill.pos").write_text(str(first))  # the earlier drainer sent message 0
    spill = SpillFile(tmp_path)
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-1", "tenant-2"]
    assert spill.paths() == [tmp_path / segment_name(0)]


def test_full_spill_refuses_and_keeps_what_it_holds(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path, max_bytes=500)
    spill.append([message(1, size=200)])
    with pytest.raises(SpillFull) as full:
        spill.append([message(2, size=400)])
    assert full.value.retry_after_s > 0
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-1"]


def test_concurrent_appends_share_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While one fsync runs the others' frames are written, and one fsync covers them all.
    The first fsync is held until every other append has written its frame, so the count
    holds however the threads happen to be scheduled: forty appends, two fsyncs."""
    calls: list[int] = []
    real_fsync = os.fsync
    spill = SpillFile(tmp_path)
    spill.append([message(0)])  # the segment exists: only appends' fsyncs are counted below
    [segment] = spill.paths()
    everything = segment.stat().st_size + sum(len(encode_message(message(n))) for n in range(1, 41))

    def held_fsync(descriptor: int) -> None:
        calls.append(descriptor)
        deadline = time.monotonic() + 30  # reached only if appends cannot write meanwhile
        while len(calls) == 1 and os.fstat(descriptor).st_size < everything:
            assert time.monotonic() < deadline, "no other append wrote while an fsync ran"
            time.sleep(0.005)
        real_fsync(descriptor)

    monkeypatch.setattr(spill_module.os, "fsync", held_fsync)
    ends: list[int] = []
    threads = [
        threading.Thread(target=lambda n=n: ends.append(spill.append([message(n)])))
        for n in range(1, 41)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ends) == 40 and max(ends) == spill.end == everything  # each returned once fsynced
    assert len(calls) == 2  # the held one, then one for the thirty-nine frames written meanwhile
    keys = {m.key for m in spill.read_batch().messages}
    assert keys == {message(n).key for n in range(41)}


def test_a_failed_fsync_fails_its_appends_and_cuts_their_frames_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    kept = spill.end

    def failing(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(spill_module.os, "fsync", failing)
    with pytest.raises(SpillFull, match="cannot be written"):
        spill.append([message(2)])
    monkeypatch.undo()
    assert spill.end == kept
    spill.append([message(3)])  # a fresh segment after the one that failed
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-1", "tenant-3"]
    spill.close()
    assert [m.tenant for m in SpillFile(tmp_path).read_batch().messages] == [
        "tenant-1", "tenant-3",
    ]  # fmt: skip


def test_a_frame_that_is_no_message_is_unreadable_and_the_rest_is_read(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    [segment] = spill.paths()
    spill.close()
    body = b"\0\1\0\4" + bytes(8) + b"k" + b"\xff\xfe\xfd\xfc"  # a tenant that is no UTF-8
    with open(segment, "ab") as data:
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


def disk_full(*_: object) -> None:
    raise OSError(28, "No space left on device")


def test_a_write_the_full_disk_cuts_short_is_cut_off_and_the_log_goes_on_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after half a frame (as a disk that fills mid-write answers): the append
    fails, its half frame is cut off, and once there is room the log goes on as if the
    failed append had never been tried."""
    spill = SpillFile(tmp_path)
    spill.append([message(1)])
    real_write = os.write

    def half_then_full(descriptor: int, data: bytes) -> int:
        monkeypatch.setattr(spill_module.os, "write", disk_full)
        return real_write(descriptor, bytes(data[: len(data) // 2]))

    monkeypatch.setattr(spill_module.os, "write", half_then_full)
    with pytest.raises(SpillFull, match=r"cannot be written .*No space left"):
        spill.append([message(2, size=400)])
    monkeypatch.undo()
    spill.append([message(3)])
    spill.close()
    assert [m.tenant for m in SpillFile(tmp_path).read_batch().messages] == [
        "tenant-1", "tenant-3",
    ]  # fmt: skip


def test_a_segment_whose_name_cannot_be_made_durable_is_removed_and_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = SpillFile(tmp_path)
    monkeypatch.setattr(spill_module, "_fsync_directory", disk_full)
    with pytest.raises(SpillFull, match="No space left"):
        spill.append([message(1)])
    assert spill.paths() == [] and not list(tmp_path.glob("spill-*.log"))
    monkeypatch.undo()
    spill.append([message(2)])
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-2"]


def test_a_failed_fsync_when_a_segment_rolls_fails_that_append_and_the_log_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a full segment fsyncs it; when that fails, the append that rolled it fails
    and the log stays readable, the next append rolling it again."""
    spill = SpillFile(tmp_path, segment_bytes=200)
    spill.append([message(1, size=100)])
    kept = spill.end
    monkeypatch.setattr(spill_module.os, "fsync", disk_full)
    with pytest.raises(SpillFull):
        spill.append([message(2, size=100)])  # rolls: the old segment's fsync fails
    monkeypatch.undo()
    assert spill.end == kept
    spill.append([message(3, size=100)])
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-1", "tenant-3"]


def test_a_position_note_the_disk_refuses_holds_in_memory_and_the_next_call_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spill = SpillFile(tmp_path, segment_bytes=50)
    spill.append([message(1)])
    spill.append([message(2)])  # a second segment: the first can go once drained
    first_end = spill.read_batch(max_bytes=1).end
    monkeypatch.setattr(spill_module.os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        spill.mark_drained(first_end)
    assert not spill.position_saved()
    assert spill.read_position == first_end and len(spill.paths()) == 1  # let go of all the same
    monkeypatch.undo()
    spill.mark_drained(0)  # nothing new to let go: writes the note it owes
    assert spill.position_saved()
    spill.close()
    assert SpillFile(tmp_path).read_position == first_end


def test_rewind_reads_again_from_the_drained_position(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(1), message(2), message(3)])
    first = spill.read_batch(max_bytes=1)
    spill.mark_drained(first.end)  # message 1 is done with for good
    spill.mark_read(spill.read_batch().end)  # 2 and 3 went to a broker that died
    assert not spill.pending()
    spill.rewind()
    assert [m.tenant for m in spill.read_batch().messages] == ["tenant-2", "tenant-3"]
