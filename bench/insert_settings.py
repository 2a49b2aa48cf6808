"""CPU per span of the store writer's SQL insert with its settings against without one of
them, in one run.

The same `pathgrade.spans` values (bench/store_insert.py's: the realistic mix forwarded as
the collector does on default settings) are inserted through
`otlp_insert.insert_messages` into one throwaway embedded store (chDB, in this
process, so its CPU is counted), alternately with the shipped `INSERT_SETTINGS` and with
them less `--without` (default `optimize_on_insert`, i.e. ClickHouse's default for it),
each round under fresh tenants so every insert writes new rows. CPU is this process's
(every thread), per span inserted, for `--rounds` rounds; the last line is the ratio of
the medians shipped / without.

    python bench/insert_settings.py [--spans 50000] [--rounds 5] [--without optimize_on_insert]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pathgrade.batch_plane.store import otlp_insert
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.schemas.decline import declined
from store_insert import forwarded_values, parsed

from pathgrade.stack.gc_schedule import schedule_full_collections


def insert_cpu(store: ClientStore, values: list[bytes], tenant: str, settings: dict) -> float:
    """CPU µs per span of inserting `values` as `tenant` with the insert `settings`."""
    shipped = dict(otlp_insert.INSERT_SETTINGS)
    otlp_insert.INSERT_SETTINGS.clear()
    otlp_insert.INSERT_SETTINGS.update(settings)
    try:
        messages = parsed(values, tenant)
        started = time.process_time()
        answers = otlp_insert.insert_messages(store, messages)
        used = time.process_time() - started
    finally:
        otlp_insert.INSERT_SETTINGS.clear()
        otlp_insert.INSERT_SETTINGS.update(shipped)
    refused = sum(map(declined, answers))
    assert not refused, f"{refused} messages declined"
    return used / sum(m.spans for m in messages) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--without", default="optimize_on_insert")
    args = parser.parse_args()
    schedule_full_collections()  # as the store owner does (pathgrade.stack.children)
    values = forwarded_values(args.spans, "realistic")
    variants = {
        "shipped": dict(otlp_insert.INSERT_SETTINGS),
        f"without {args.without}": {
            k: v for k, v in otlp_insert.INSERT_SETTINGS.items() if k != args.without
        },
    }
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="pathgrade-insert-settings-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        otlp_insert.create_input_table(store)
        otlp_insert.insert_messages(store, parsed(values[:10], "warm"))  # first-use costs
        for number in range(args.rounds):
            for index, (name, settings) in enumerate(variants.items()):
                cpu[name].append(insert_cpu(store, values, f"r{number}v{index}", settings))
            print(f"round {number + 1}: " + ", ".join(
                f"{name} {values_[-1]:.1f}" for name, values_ in cpu.items()
            ) + " µs CPU per span", flush=True)  # fmt: skip
        store.close()
    medians = {name: statistics.median(values_) for name, values_ in cpu.items()}
    first, second = medians.values()
    print(f"{len(values):,} values, medians: " + ", ".join(
        f"{name} {median:.1f}" for name, median in medians.items()
    ) + f" µs CPU per span; shipped / without: {first / second:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
