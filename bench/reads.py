"""CPU per query: anyone's SQL on the reader session against pathgrade's own query on the
writer session, one embedded chDB store.

A read (`ClientStore.query(..., readonly=True)`: what `pathgrade sql` and every query
through the loopback endpoint run) first has ClickHouse parse the statement and checks
its canonical form (`pathgrade.batch_plane.store.reads`), then runs that; the baseline is
the same parametrised query on the writer session. Alternating rounds in one run; prints
CPU ms per query of each and the ratio.

    python bench/reads.py [--queries 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time

from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.schemas.migrations import migrate

QUERY = "SELECT count() FROM spans FINAL WHERE TraceId = {trace:String}"


def cpu_per_query_ms(store: ClientStore, queries: int, readonly: bool) -> float:
    started = time.process_time()
    for _ in range(queries):
        store.query(QUERY, {"trace": "ab" * 16}, readonly=readonly)
    return (time.process_time() - started) / queries * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pathgrade-reads-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        writer, reader = [], []
        for _ in range(args.rounds):
            writer.append(cpu_per_query_ms(store, args.queries, readonly=False))
            reader.append(cpu_per_query_ms(store, args.queries, readonly=True))
        store.close()
    best_writer, best_reader = min(writer), min(reader)
    print(f"writer session  {best_writer:.2f} ms CPU per query (best of {args.rounds})")
    print(f"reader session  {best_reader:.2f} ms CPU per query (parse, check, run)")
    print(f"ratio           {best_reader / best_writer:.2f}x the writer session's")


if __name__ == "__main__":
    main()
