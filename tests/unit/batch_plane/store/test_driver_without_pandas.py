"""The store never imports pandas (87 MB resident in the store owner): clickhouse-connect
would on the first insert, and `batch_plane.store.client` tells it pandas is absent through
the driver's own options, a switch an upgrade of the driver could move; this test fails
then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

INSERT_AND_READ = """
import sys
from pathgrade.batch_plane.store.client import embedded_dsn, open_client_store

store = open_client_store(embedded_dsn(sys.argv[1]))
store.command("CREATE TABLE probe (n UInt64, s String) ENGINE = MergeTree ORDER BY n")
store.insert("probe", [[1, "a"], [2, "b"]], ["n", "s"])
assert [tuple(row) for row in store.query("SELECT count(), max(s) FROM probe").rows] == [(2, "b")]
print("pandas" in sys.modules)
"""


def test_an_insert_and_a_read_import_no_pandas(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", INSERT_AND_READ, str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
