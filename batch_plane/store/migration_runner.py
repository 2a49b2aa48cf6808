"""Applying the ClickHouse migrations (`schemas.migrations`) idempotently, and laying
them out on a cluster.

Applied versions are recorded in `pathgrade_migrations`; applying again is a no-op. The
client is any clickhouse-connect client (server or chDB): only `command` and `query` are
used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pathgrade.batch_plane.store.cluster_ddl import on_cluster, on_shards
from pathgrade.schemas.migrations import (
    CONTENT_COLUMNS,
    DEFAULT_CONTENT_RETENTION_DAYS,
    DEFAULT_RETENTION_DAYS,
    LOG_CONTENT_COLUMNS,
    SPAN_DERIVED_TTL,
    Migration,
    bundled_migrations,
)
from pathgrade.schemas.store import Store

MIGRATIONS_TABLE = "pathgrade_migrations"
"""Where the runner records each applied migration (version, name, checksum)."""

_MIGRATIONS_TABLE_DDL = f"""
CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE}
(
    Version UInt32,
    Name String,
    Checksum String,
    AppliedAt DateTime64(3) DEFAULT now64(3)
)
ENGINE = ReplacingMergeTree(AppliedAt)
ORDER BY Version
"""

CLUSTER_COMMENT = "pathgrade migrations, replicated on cluster "
"""The migrations table's comment on a cluster, followed by the cluster's name."""
SHARDED_COMMENT = "pathgrade migrations, sharded on cluster "
"""The migrations table's comment on a sharded cluster (`--shards`), then its name."""


class ClusterMismatch(RuntimeError):
    """The store was migrated for another cluster (or none) than the one asked for."""


class ClickHouseClient(Protocol):
    """What the runner uses of a clickhouse-connect client."""

    def command(self, cmd: str) -> Any: ...
    def query(self, query: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a store's tables live: one server (no cluster), a replicated `cluster`, or
    with `shards` a sharded one (`cluster_ddl`)."""

    cluster: str | None = None
    shards: bool = False

    def __post_init__(self) -> None:
        if self.shards and self.cluster is None:
            raise ValueError("shards: sharded tables need a cluster (--cluster NAME)")

    def statements(self, statement: str) -> list[str]:
        """`statement` as it runs on this layout."""
        if self.cluster is None:
            return [statement]
        if self.shards:
            return on_shards(statement, self.cluster)
        return [on_cluster(statement, self.cluster)]

    def describe(self) -> str:
        """The layout in words, for an error message."""
        if self.cluster is None:
            return "one server (no cluster)"
        return f"{'sharded ' if self.shards else ''}cluster {self.cluster}"


def migrations_table_ddl(cluster: str | None, shards: bool = False) -> str:
    """The migrations table's DDL, for one server or (replicated, commented) a cluster;
    on a sharded cluster it is replicated on every server (cluster_ddl.EVERYWHERE)."""
    if cluster is None:
        return _MIGRATIONS_TABLE_DDL
    [ddl] = Layout(cluster, shards).statements(_MIGRATIONS_TABLE_DDL)
    return ddl + f"COMMENT '{SHARDED_COMMENT if shards else CLUSTER_COMMENT}{cluster}'"


def migration_ddl(
    cluster: str | None = None, migrations: list[Migration] | None = None, shards: bool = False
) -> str:
    """Every DDL statement `migrate(client, cluster=cluster, shards=shards)` runs on an
    empty database."""
    migrations = bundled_migrations() if migrations is None else migrations
    layout = Layout(cluster, shards)
    statements = [migrations_table_ddl(cluster, shards).strip()] + [
        laid for m in migrations for s in m.statements() for laid in layout.statements(s)
    ]
    return "".join(f"{s};\n\n" for s in statements)


def retention_ddl(
    content_days: int = DEFAULT_CONTENT_RETENTION_DAYS,
    retention_days: int = DEFAULT_RETENTION_DAYS,
    cluster: str | None = None,
    shards: bool = False,
) -> list[str]:
    """The statements that keep captured content `content_days` and span rows (with
    their facts, and the rows the views derive from them: `SPAN_DERIVED_TTL`)
    `retention_days`, counted from when the collector received each span (`ReceivedAt`);
    ValueError unless 1 <= content_days <= retention_days. On a sharded cluster they apply
    to the local tables."""
    if not 1 <= content_days <= retention_days:
        raise ValueError(
            f"retention: content must be kept 1 day or more and no longer than the rows "
            f"(got content {content_days} days, rows {retention_days} days)"
        )
    statements = [
        f"ALTER TABLE spans MODIFY COLUMN {column} TTL toDateTime(ReceivedAt) + "
        f"INTERVAL {content_days} DAY"
        for column in CONTENT_COLUMNS
    ]
    statements += [
        f"ALTER TABLE logs MODIFY COLUMN {column} TTL toDateTime(ReceivedAt) + "
        f"INTERVAL {content_days} DAY"
        for column in LOG_CONTENT_COLUMNS
    ]
    statements += [
        f"ALTER TABLE spans MODIFY TTL toDateTime(ReceivedAt) + INTERVAL {retention_days} DAY",
        f"ALTER TABLE trace_times MODIFY TTL toDateTime(End) + INTERVAL {retention_days} DAY",
        f"ALTER TABLE logs MODIFY TTL toDateTime(ReceivedAt) + INTERVAL {retention_days} DAY",
    ]
    statements += [
        f"ALTER TABLE {table} MODIFY TTL {counted_from} + INTERVAL {retention_days} DAY"
        for table, counted_from in SPAN_DERIVED_TTL.items()
    ]
    layout = Layout(cluster, shards)
    return [laid for s in statements for laid in layout.statements(s)]


def set_retention(
    client: ClickHouseClient,
    content_days: int = DEFAULT_CONTENT_RETENTION_DAYS,
    retention_days: int = DEFAULT_RETENTION_DAYS,
) -> None:
    """Apply `retention_ddl` to a migrated store (on its cluster when it has one)."""
    layout = recorded_layout(migrations_table_comment(client))
    for statement in retention_ddl(content_days, retention_days, layout.cluster, layout.shards):
        client.command(statement)


def recorded_layout(comment: str | None) -> Layout:
    """The layout a store was migrated for, from its migrations table's comment (no
    cluster: one server, or not migrated yet)."""
    for prefix, shards in ((CLUSTER_COMMENT, False), (SHARDED_COMMENT, True)):
        if comment and comment.startswith(prefix):
            return Layout(comment[len(prefix) :], shards)
    return Layout()


def migrations_table_comment(client: ClickHouseClient) -> str | None:
    """The migrations table's comment; None when the table does not exist yet."""
    rows = client.query(
        "SELECT comment FROM system.tables WHERE database = currentDatabase() "
        f"AND name = '{MIGRATIONS_TABLE}'"
    ).result_rows
    return rows[0][0] if rows else None


def applied_versions(
    client: ClickHouseClient, cluster: str | None = None, shards: bool = False
) -> dict[int, str]:
    """Version -> checksum of every migration already applied."""
    client.command(migrations_table_ddl(cluster, shards))
    rows = client.query(f"SELECT Version, Checksum FROM {MIGRATIONS_TABLE} FINAL").result_rows
    return {int(version): checksum for version, checksum in rows}


def applied_names(store: Store) -> list[tuple[int, str]]:
    """(version, name) of every migration applied to `store`, oldest first."""
    rows = store.query(f"SELECT Version, Name FROM {MIGRATIONS_TABLE} FINAL ORDER BY Version")
    return [(int(version), name) for version, name in rows.rows]


def migrate(
    client: ClickHouseClient,
    migrations: list[Migration] | None = None,
    cluster: str | None = None,
    shards: bool = False,
) -> list[Migration]:
    """Apply every migration not yet applied, in order; return the ones applied now. With
    `cluster` (and `shards`), or on a store migrated for a cluster, every statement is
    laid out for it (`Layout.statements`).

    A migration whose recorded checksum differs from the shipped file is an error: shipped
    migrations are immutable, a change is a new migration. So is a layout other than the
    one the store was migrated for (ClusterMismatch).
    """
    migrations = bundled_migrations() if migrations is None else migrations
    comment = migrations_table_comment(client)
    recorded, asked = recorded_layout(comment), Layout(cluster, shards)
    if cluster is not None and recorded != asked and comment is not None:
        flags = f"--cluster {cluster}{' --shards' if shards else ''}"
        raise ClusterMismatch(
            f"{flags}: this database was migrated for {recorded.describe()}; "
            "its tables cannot be moved onto another layout by migrating again"
        )
    layout = asked if cluster is not None else recorded
    done = applied_versions(client, layout.cluster, layout.shards)
    applied = []
    for migration in migrations:
        checksum = done.get(migration.version)
        if checksum is not None:
            if checksum != migration.checksum:
                raise RuntimeError(
                    f"migration {migration.version:04d}_{migration.name} was applied with "
                    f"checksum {checksum} but the shipped file has {migration.checksum}; "
                    "shipped migrations must not change, add a new one"
                )
            continue
        for statement in migration.statements():
            for laid in layout.statements(statement):
                client.command(laid)
        client.command(
            f"INSERT INTO {MIGRATIONS_TABLE} (Version, Name, Checksum) VALUES "
            f"({migration.version}, '{migration.name}', '{migration.checksum}')"
        )
        applied.append(migration)
    return applied
