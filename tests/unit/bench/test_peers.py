"""bench/peers.py without Phoenix: its offline settings, its span count read from a SQLite
database, the sockets it calls off the loopback, the per-process and ratio tables and the
verdicts against issue 46's targets."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.benches import load_bench

_MB = 1024 * 1024


@pytest.fixture
def peers(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return load_bench("peers", monkeypatch)


def test_phoenix_env_is_offline_and_drops_the_callers_phoenix_settings(
    peers: ModuleType, tmp_path: Path
) -> None:
    caller = {"PATH": "/bin", "PHOENIX_SQL_DATABASE_URL": "postgresql://elsewhere/db"}
    env = peers.phoenix_env(caller, tmp_path, 16006, 14317)
    assert "PHOENIX_SQL_DATABASE_URL" not in env
    assert env["PATH"] == "/bin"
    assert env["PHOENIX_WORKING_DIR"] == str(tmp_path)
    assert (env["PHOENIX_HOST"], env["PHOENIX_PORT"], env["PHOENIX_GRPC_PORT"]) == (
        "127.0.0.1", "16006", "14317",
    )  # fmt: skip
    assert env["PHOENIX_TELEMETRY_ENABLED"] == "false"
    assert env["PHOENIX_ALLOW_EXTERNAL_RESOURCES"] == "false"


def test_phoenix_span_count_reads_a_wal_database_and_is_zero_before_its_table(
    peers: ModuleType, tmp_path: Path
) -> None:
    database = tmp_path / "phoenix.db"
    assert peers.phoenix_span_count(database) == 0  # no file yet: not created by the read
    assert not database.exists()
    writer = sqlite3.connect(database)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("CREATE TABLE projects (id INTEGER)")
    writer.commit()
    assert peers.phoenix_span_count(database) == 0  # migrations not there yet
    writer.execute("CREATE TABLE spans (id INTEGER)")
    writer.executemany("INSERT INTO spans VALUES (?)", [(n,) for n in range(7)])
    writer.commit()
    assert peers.phoenix_span_count(database) == 7
    writer.execute("INSERT INTO spans VALUES (8)")  # uncommitted: not counted
    assert peers.phoenix_span_count(database) == 7
    writer.close()


TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 101 1
   1: 0100007F:A000 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 102 1
   2: 0A00000A:B000 22D8B85D:01BB 01 00000000:00000000 00:00000000 00000000     0        0 103 1
   3: 0A00000A:B001 0500000A:01BB 02 00000000:00000000 00:00000000 00000000     0        0 104 1
   4: 0A00000A:B002 22D8B85D:0050 01 00000000:00000000 00:00000000 00000000     0        0 999 1
"""
TABLE6 = """\
  sl  local_address                         remote_address                        st inode
   0: 00000000000000000000000001000000:A000 00000000000000000000000001000000:1F90 01 0 0 0 0 0 201
   1: 0000000000000000FFFF00000100007F:A001 0000000000000000FFFF00000100007F:1F90 01 0 0 0 0 0 202
   2: 0000000000000000FFFF00000100007F:A002 0000000000000000FFFF00000500000A:0035 01 0 0 0 0 0 203
   3: 00000000000000000000000001000000:A003 B80D0120000000000000000001000000:01BB 01 0 0 0 0 0 204
"""


def test_off_loopback_names_the_processes_connections_off_the_loopback(
    peers: ModuleType,
) -> None:
    inodes = {"101", "102", "103", "104"}  # 999 belongs to another process
    assert peers.off_loopback(TABLE, inodes) == ["93.184.216.34:443", "10.0.0.5:443"]
    assert peers.off_loopback(TABLE, {"101", "102"}) == []  # listening, loopback
    inodes6 = {"201", "202", "203", "204"}
    assert peers.off_loopback(TABLE6, inodes6) == [
        "10.0.0.5:53",
        "2001:0db8:0000:0000:0000:0000:0000:0001:443",
    ]


def phase(peers: ModuleType, spans: int, cpu_s: dict[str, float], **kwargs) -> object:
    return peers.Phase(spans, 2.0, cpu_s, **kwargs)


def result(peers: ModuleType, large: bool = True) -> object:
    rows = {"realtime: realtime-0 [11]": 0.4, "realtime: realtime-1 [12]": 0.6,
            "store owner: store owner (pathgrade up) [10]": 1.0}  # fmt: skip
    phases = {
        "burst": phase(
            peers,
            10_000,
            rows,
            peak_rss={"realtime: realtime-0 [11]": 90 * _MB, "realtime: realtime-1 [12]": 30 * _MB},
            peak_total_rss=700 * _MB,
        ),
        "steady": phase(peers, 5_000, {"store owner: store owner (pathgrade up) [10]": 1.5}),
    }
    if large:
        phases["large"] = phase(peers, 100_000, {"store owner: x [10]": 10.0})
    idle = {"realtime: realtime-0 [11]": 60 * _MB, "realtime: realtime-1 [12]": 40 * _MB,
            "store owner: store owner (pathgrade up) [10]": 300 * _MB}  # fmt: skip
    return peers.Result("pathgrade", "0.1", idle, 0.05, phases, [])


def test_process_table_sums_a_roles_processes_and_counts_cpu_per_span(
    peers: ModuleType,
) -> None:
    lines = peers.process_table(result(peers))
    assert lines[0].split(" | ")[1:] == [
        "idle RSS MB", "burst peak RSS MB", "CPU µs/span burst", "CPU µs/span steady",
        "CPU µs/span large |",
    ]  # fmt: skip
    rows = {line.split(" | ")[0]: line.split(" | ")[1:] for line in lines[2:]}
    # realtime: two processes, one row; 1.0 CPU s over 10,000 spans in the burst
    assert rows["| realtime"] == ["100", "120", "100.0", "0.0", "0.0 |"]
    assert rows["| store owner"] == ["300", "0", "100.0", "300.0", "100.0 |"]
    assert rows["| whole"] == ["400", "700", "200.0", "300.0", "100.0 |"]


def test_ratio_table_and_targets(peers: ModuleType) -> None:
    ours = peers.pathgrade_figures(result(peers))
    assert ours["burst CPU / large-load CPU"] == pytest.approx(2.0)  # 200 / 100 µs
    assert ours["steady CPU / large-load CPU"] == pytest.approx(3.0)
    peer = {name: value * 4 for name, value in peers.whole(result(peers)).items()}
    lines = peers.ratio_table(peers.whole(result(peers)), peer, "Phoenix")
    assert lines[0] == "| whole system | pathgrade | Phoenix | pathgrade / Phoenix |"
    assert "| idle RSS, MB | 400.0 | 1,600.0 | 0.250 |" in lines
    assert "| requests sent again (refused, or connection closed) | 0.0 | 0.0 | - |" in lines
    verdicts = peers.target_lines(ours)
    assert verdicts == [
        "- idle RSS, MB: 400.00 (target <= 500): holds",
        "- burst peak RSS, MB: 700.00 (target < 1024): holds",
        "- burst CPU / large-load CPU: 2.00 (target <= 1.5): does NOT hold",
        "- steady CPU / large-load CPU: 3.00 (target <= 1.5): does NOT hold",
    ]


def test_targets_bounds_and_what_is_not_measured(peers: ModuleType) -> None:
    at_bounds = {"idle RSS, MB": 500.0, "burst peak RSS, MB": 1024.0}
    assert peers.target_lines(at_bounds) == [
        "- idle RSS, MB: 500.00 (target <= 500): holds",  # "at or under"
        "- burst peak RSS, MB: 1,024.00 (target < 1024): does NOT hold",  # "under"
    ]
    assert len(peers.target_lines(peers.pathgrade_figures(result(peers, large=False)))) == 2
