"""The dead-letter file: entries moved aside with their reason, counted across restarts,
listed and re-driven into the spill by `pathgrade dead-letter`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pathgrade.collector.dead_letter import (
    DEAD_LETTER_FILE,
    DeadLetter,
    DeadLetterFile,
    read_entries,
    redrive,
)
from pathgrade.collector.spill import OutgoingMessage, SpillFile, SpillInUse, encode_body

from pathgrade.cli.main import main


def message(n: int) -> OutgoingMessage:
    return OutgoingMessage(f"{n:032x}".encode(), b"v" * (10 + n), "acme", 1_700_000_000 * 10**9)


def test_entries_are_appended_in_order_and_counted_again_at_open(tmp_path: Path) -> None:
    dead = DeadLetterFile(tmp_path)
    assert dead.entries == 0
    dead.append([DeadLetter("too large", encode_body(message(1)))])
    dead.append(
        [DeadLetter("corrupt", b"\x00garbage"), DeadLetter("ü" * 5, encode_body(message(2)))]
    )
    assert dead.entries == 3
    assert DeadLetterFile(tmp_path).entries == 3  # a restarted collector still reports them
    entries = list(read_entries(dead.path))
    assert [e.reason for e in entries] == ["too large", "corrupt", "ü" * 5]
    assert [e.message() for e in entries] == [message(1), None, message(2)]


def test_a_torn_final_entry_is_not_an_entry(tmp_path: Path) -> None:
    dead = DeadLetterFile(tmp_path)
    dead.append([DeadLetter("too large", encode_body(message(1)))])
    with open(dead.path, "ab") as data:
        data.write(b"\x00\x00\x01\x00partial")
    assert DeadLetterFile(tmp_path).entries == 1


def test_redrive_appends_the_messages_to_the_spill_and_keeps_the_rest(tmp_path: Path) -> None:
    spill = SpillFile(tmp_path)
    spill.append([message(0)])
    spill.close()
    DeadLetterFile(tmp_path).append([
        DeadLetter("too large", encode_body(message(1))),
        DeadLetter("unreadable spill frame", b"\x00\x01"),
        DeadLetter("too large", encode_body(message(2))),
    ])  # fmt: skip

    assert redrive(tmp_path) == (2, 1)

    reopened = SpillFile(tmp_path)
    assert reopened.read_batch().messages == [message(0), message(1), message(2)]
    assert [e.reason for e in read_entries(tmp_path / DEAD_LETTER_FILE)] == [
        "unreadable spill frame"
    ]
    with pytest.raises(SpillInUse):  # never while a collector owns the directory
        redrive(tmp_path)
    reopened.close()


def test_cli_lists_and_redrives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    DeadLetterFile(spill_dir).append(
        [DeadLetter("Kafka refused the message", encode_body(message(3)))]
    )

    assert main(["dead-letter", "--data-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["#", "received", "tenant"]
    assert table[1].split()[:5] == ["1", "2023-11-14T22:13:20Z", "acme", f"{3:032x}", "13"]
    assert table[1].endswith("Kafka refused the message")

    assert main(["dead-letter", "--spill-dir", str(spill_dir), "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["tenant"] == "acme" and row["bytes"] == 13

    assert main(["dead-letter", "--spill-dir", str(spill_dir), "--redrive"]) == 0
    assert capsys.readouterr().out.startswith("re-drove 1 messages into the spill")
    assert main(["dead-letter", "--spill-dir", str(spill_dir)]) == 0
    assert "no dead-lettered messages" in capsys.readouterr().out

    held = SpillFile(spill_dir)
    assert main(["dead-letter", "--spill-dir", str(spill_dir), "--redrive"]) == 2
    assert "is in use by another process" in capsys.readouterr().err
    held.close()


def test_an_append_the_full_disk_cuts_short_is_cut_off_so_the_next_one_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathgrade.collector import dead_letter as dead_letter_module

    dead = DeadLetterFile(tmp_path)
    dead.append([DeadLetter("too large", encode_body(message(1)))])
    size = dead.path.stat().st_size
    real_write = os.write

    def half_then_full(descriptor: int, data: bytes) -> int:
        def full(*_: object) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(dead_letter_module.os, "write", full)
        return real_write(descriptor, bytes(data[: len(data) // 2]))

    monkeypatch.setattr(dead_letter_module.os, "write", half_then_full)
    with pytest.raises(OSError, match="No space left"):
        dead.append([DeadLetter("corrupt", b"\x00" * 300)])
    monkeypatch.undo()
    assert dead.path.stat().st_size == size and dead.entries == 1
    dead.append([DeadLetter("corrupt", b"\x01garbage")])
    assert [e.reason for e in read_entries(dead.path)] == ["too large", "corrupt"]
