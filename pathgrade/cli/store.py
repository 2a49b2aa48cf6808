"""Commands on the store and the topics: `pathgrade sql`, `topics` and `migrate`."""

from __future__ import annotations

import argparse
from typing import Any

from pathgrade.cli.support import (
    CliError,
    cli_store,
    int_between,
    retention_args,
    retention_of,
    store_args,
)


def register(commands: Any) -> None:
    sql = commands.add_parser("sql", help="run a read-only query against the store")
    store_args(sql, tenant=True)
    sql.add_argument("--format", choices=["table", "json"], default="table")
    sql.add_argument("query", help='the SQL, e.g. "SELECT count() FROM spans"')
    sql.set_defaults(run=_cmd_sql)

    topics = commands.add_parser("topics", help="create pathgrade's Kafka topics where missing")
    topics.add_argument("--kafka", metavar="HOST:PORT", required=True)
    topics.add_argument(
        "--partitions", type=int_between(1, 10_000, "partitions"), default=None,
        help="partitions of each new topic: at least the consumers of one group (default 4)",
    )  # fmt: skip
    topics.add_argument(
        "--replication-factor", type=int_between(1, 100, "replicas"), default=1,
        help="replicas of each new topic (default 1; 3 on a production cluster)",
    )  # fmt: skip
    topics.set_defaults(run=_cmd_topics)

    migrate = commands.add_parser("migrate", help="apply the ClickHouse migrations")
    store_args(migrate)
    migrate.add_argument(
        "--cluster", metavar="NAME",
        help="a replicated ClickHouse cluster (with --clickhouse): every table ON CLUSTER "
        "with a Replicated engine; later migrations follow it",
    )  # fmt: skip
    migrate.add_argument(
        "--shards", action="store_true",
        help="with --cluster: a sharded cluster; span, trace, score and alert tables are "
        "Distributed over replicated local tables, sharded by trace id (docs/scale.md)",
    )  # fmt: skip
    migrate.add_argument(
        "--print-sql", action="store_true",
        help="print the DDL for an empty database instead of applying it (no store needed)",
    )  # fmt: skip
    retention_args(migrate)
    migrate.set_defaults(run=_cmd_migrate)


def _cmd_sql(args: argparse.Namespace) -> int:
    from pathgrade.cli.output import format_json, format_table

    with cli_store(args) as store:
        result = store.query(args.query, readonly=True)
    print(format_table(result) if args.format == "table" else format_json(result))
    return 0


def _cmd_topics(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    from pathgrade.schemas.topics import ALL_TOPICS
    from pathgrade.stack.broker import (
        DEFAULT_PARTITIONS,
        BrokerError,
        ensure_topics,
        wait_for_kafka,
    )

    partitions = args.partitions or DEFAULT_PARTITIONS
    try:
        wait_for_kafka(args.kafka, timeout_s=10)
        created = ensure_topics(args.kafka, partitions, args.replication_factor)
    except (BrokerError, KafkaError) as exc:
        raise CliError(f"creating topics on {args.kafka} failed: {exc}") from exc
    existing = [t for t in ALL_TOPICS if t not in created]
    print(f"topics created: {', '.join(created) or 'none'}; "
          f"already there (left as they are): {', '.join(existing) or 'none'}")  # fmt: skip
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import ClientStore
    from pathgrade.batch_plane.store.migration_runner import (
        applied_names,
        migration_ddl,
        set_retention,
    )

    if args.shards and not args.cluster:
        raise CliError("--shards needs --cluster NAME: the shards are those of a cluster")
    if args.print_sql:
        try:
            print(migration_ddl(args.cluster, shards=args.shards), end="")
        except ValueError as exc:
            raise CliError(f"--{exc}") from exc
        return 0
    retention = retention_of(args)
    if args.cluster:
        return _migrate_cluster(args.clickhouse, args.cluster, args.shards, retention)
    with cli_store(args, must_exist=False) as store:
        if retention is not None:
            if not isinstance(store, ClientStore):
                raise CliError(
                    "retention: a running `pathgrade up` owns this store; stop it, or give "
                    "the retention flags to `pathgrade up`"
                )
            set_retention(store.client, *retention)
            print(f"retention: content {retention[0]} days, span rows {retention[1]} days")
        rows = applied_names(store)
    print("migrations applied: " + ", ".join(f"{v:04d}_{n}" for v, n in rows))
    return 0


def _migrate_cluster(
    clickhouse: str | None, cluster: str, shards: bool, retention: tuple[int, int] | None
) -> int:
    """`pathgrade migrate --cluster [--shards]`: straight to the server, every statement
    ON CLUSTER (sharded with `shards`)."""
    from clickhouse_connect.driver.exceptions import ClickHouseError

    from pathgrade.batch_plane.store.client import StoreUnavailable, connect
    from pathgrade.batch_plane.store.migration_runner import ClusterMismatch, migrate, set_retention

    if not clickhouse:
        raise CliError("--cluster needs --clickhouse URL: the embedded store is one server")
    try:
        client = connect(clickhouse)
    except StoreUnavailable as exc:
        raise CliError(str(exc)) from exc
    try:
        applied = migrate(client, cluster=cluster, shards=shards)
        if retention is not None:
            set_retention(client, *retention)
    except (ClusterMismatch, ValueError) as exc:
        raise CliError(str(exc)) from exc
    except ClickHouseError as exc:
        raise CliError(f"migrating on cluster {cluster} failed: {exc}") from exc
    finally:
        client.close()
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none (up to date)"
    print(f"migrations applied on {'sharded ' if shards else ''}cluster {cluster}: {names}")
    return 0
