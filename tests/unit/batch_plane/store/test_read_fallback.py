"""On a ClickHouse without `parseQueryToJSON` (a server before 26.x), reads are inspected
with an in-memory embedded engine of the reading process instead: still checked, still
answered. Run in a process of its own (chDB opens one store path per process; the
in-memory engine needs a process with no embedded store open, as the UI box's is)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import clickhouse_connect
from pathgrade.batch_plane.store.client import ClientStore, StatementRefused

class OldServer:
    '''An in-memory engine that does not know parseQueryToJSON, as an older server.'''

    def __init__(self):
        self.client = clickhouse_connect.get_client(dsn="chdb://:memory:")

    def query(self, sql, parameters=None):
        if "parseQueryToJSON" in sql:
            raise RuntimeError("Code: 46. DB::Exception: Unknown function parseQueryToJSON")
        return self.client.query(sql, parameters=parameters)

    def close(self):
        self.client.close()

old = OldServer()
store = ClientStore(old, old)
assert store.query("SELECT 1 + {n:UInt8}", {"n": 1}, readonly=True).rows == [[2]]
try:
    store.query("SELECT file('/etc/passwd')", readonly=True)
except StatementRefused as refused:
    assert "function file() is not allowed" in str(refused)
else:
    raise AssertionError("file() was not refused")
print("checked")
"""


def test_reads_are_checked_with_an_embedded_parser_where_the_server_has_none() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "checked", ran.stderr
