"""CPU of the store writer's SQL insert with its refusal check as shipped (one `throwIf`
over every condition, `otlp_insert._refuse`) against one `throwIf` per condition (the
error then names the condition a message failed: what `otlp_insert.naming_statement`
checks after a refusal), in one run.

The same `pathgrade.spans` values (bench/store_insert.py's: the realistic mix forwarded as
the collector does on default settings) are inserted through `otlp_insert.insert_messages`
into one throwaway embedded store (chDB, in this process, so its CPU is counted),
alternately through each check's input table (each check's view SQL gets its own), each
round under fresh tenants: one insert of every value (`--spans`), and `--single` inserts
of one value each (a statement's fixed cost: its analysis). CPU is this process's (every
thread); medians of `--rounds` rounds and the ratios shipped / a throwIf per condition.

    python bench/refusal_check.py [--spans 50000] [--single 10] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pathgrade.batch_plane.store import otlp_insert
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.schemas.decline import declined
from store_insert import forwarded_values, parsed

from pathgrade.stack.gc_schedule import schedule_full_collections

SHIPPED = otlp_insert._refuse


def checked_with(refuse: Callable[[], str]) -> None:
    """Have the insert (its view's SQL and input table) use `refuse`."""
    otlp_insert._refuse = refuse
    otlp_insert.span_rows_select.cache_clear()
    otlp_insert.input_table.cache_clear()


def insert_cpu(store: ClientStore, values: list[bytes], tenant: str) -> float:
    """CPU seconds of inserting `values` as `tenant`, one statement."""
    messages = parsed(values, tenant)
    started = time.process_time()
    answers = otlp_insert.insert_messages(store, messages)
    used = time.process_time() - started
    assert not any(map(declined, answers)), "a value was declined"
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--single", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    schedule_full_collections()  # as the store owner does (pathgrade.stack.children)
    values = forwarded_values(args.spans, "realistic")
    spans = sum(m.spans for m in parsed(values, "count"))
    variants = {"shipped": SHIPPED, "per condition": otlp_insert._named_refusals}
    batch: dict[str, list[float]] = {name: [] for name in variants}
    single: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="pathgrade-refusal-check-") as data_dir:
        store = open_client_store(embedded_dsn(data_dir))
        migrate(store.client)
        for name, refuse in variants.items():  # each its input table, and first-use costs
            checked_with(refuse)
            otlp_insert.create_input_table(store)
            otlp_insert.insert_messages(store, parsed(values[:10], f"warm-{name}"))
        for number in range(args.rounds):
            for index, (name, refuse) in enumerate(variants.items()):
                checked_with(refuse)
                tenant = f"r{number}v{index}"
                batch[name].append(insert_cpu(store, values, tenant) / spans * 1e6)
                one = [insert_cpu(store, [v], tenant) for v in values[: args.single]]
                single[name].append(statistics.median(one) * 1e3)
            print(f"round {number + 1}: " + ", ".join(
                f"{name} {batch[name][-1]:.1f} µs/span, {single[name][-1]:.0f} ms/statement"
                for name in variants
            ), flush=True)  # fmt: skip
        store.close()
    checked_with(SHIPPED)
    per_span = {name: statistics.median(v) for name, v in batch.items()}
    per_statement = {name: statistics.median(v) for name, v in single.items()}
    print(f"{spans:,} spans ({len(values):,} values), medians: " + ", ".join(
        f"{name} {per_span[name]:.1f} µs CPU per span, {per_statement[name]:.0f} ms per "
        "one-value statement" for name in variants
    ))  # fmt: skip
    span_ratio = per_span["shipped"] / per_span["per condition"]
    statement_ratio = per_statement["shipped"] / per_statement["per condition"]
    print(f"shipped / a throwIf per condition: per span {span_ratio:.2f}, per statement "
          f"{statement_ratio:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
