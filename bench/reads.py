"""CPU per query: anyone's SQL on the reader session against pathgrade's own query on the
writer session, one embedded chDB store.

A read (`ClientStore.query(..., readonly=True)`: what `pathgrade sql`, the browser UI and
every query through the loopback endpoint run) first has ClickHouse parse the statement,
checks its canonical form (`pathgrade.batch_plane.store.reads`) and what ClickHouse's syntax
tree of it reaches (`read_policy`), then runs that; a statement text checked before (the
UI's queries, repeated with other parameters) is not checked again. The baseline is the
same parametrised query on the writer session. Alternating rounds in one run; prints CPU
ms per query of each, a new statement text every query (each one checked) and the same
text every query (checked once), and the ratios.

    python bench/reads.py [--queries 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time

from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate

QUERY = "SELECT count() FROM spans FINAL WHERE TraceId = {trace:String}"
_NUMBERS = itertools.count()


def cpu_per_query_ms(store: ClientStore, queries: int, readonly: bool, fresh: bool) -> float:
    """CPU ms per query; with `fresh`, each query's text is new (a comment no earlier
    query had), so each is checked."""
    started = time.process_time()
    for _ in range(queries):
        sql = f"/* {next(_NUMBERS)} */ {QUERY}" if fresh else QUERY
        store.query(sql, {"trace": "ab" * 16}, readonly=readonly)
    return (time.process_time() - started) / queries * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pathgrade-reads-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        writer, checked, repeated = [], [], []
        for _ in range(args.rounds):
            writer.append(cpu_per_query_ms(store, args.queries, False, fresh=True))
            checked.append(cpu_per_query_ms(store, args.queries, True, fresh=True))
            repeated.append(cpu_per_query_ms(store, args.queries, True, fresh=False))
        store.close()
    best_writer = min(writer)
    print(f"writer session            {best_writer:.2f} ms CPU per query (best of {args.rounds})")
    for label, times in (("reader, every text new", checked), ("reader, same text", repeated)):
        best = min(times)
        print(f"{label:<25} {best:.2f} ms CPU per query, {best / best_writer:.2f}x the writer's")


if __name__ == "__main__":
    main()
