"""`ClientStore.insert` leaves no rows to the cyclic garbage collector: the stack runs full
collections only every few minutes (`pathgrade.stack.gc_schedule`), so rows kept alive by
a reference cycle until then were the store owner's memory saw-tooth (docs/scale.md)."""

from __future__ import annotations

import gc

from pathgrade.batch_plane.store.client import embedded_dsn, open_client_store

ROWS = 2000


def test_inserted_rows_go_when_the_caller_drops_them(tmp_path) -> None:
    store = open_client_store(embedded_dsn(str(tmp_path)))
    try:
        store.command("CREATE TABLE t (n UInt64, s String) ENGINE = MergeTree ORDER BY n")
        gc.collect()
        gc.disable()
        try:
            rows = [[n, f"value {n}"] for n in range(ROWS)]
            store.insert("t", rows, ["n", "s"])
            del rows
            left_to_the_collector = gc.collect()
        finally:
            gc.enable()
        assert store.query("SELECT count(), uniqExact(s) FROM t").rows == [[ROWS, ROWS]]
    finally:
        store.close()
    assert left_to_the_collector < ROWS // 10
