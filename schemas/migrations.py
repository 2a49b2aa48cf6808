"""Ordered ClickHouse migrations and their idempotent application.

Each `migrations/NNNN_name.sql` file is one migration: statements separated by `;` at a
line end. Applied versions are recorded in `pathgrade_migrations`; applying again is a
no-op. The client is any clickhouse-connect client (server or chDB): only `command` and
`query` are used, so this module imports nothing but the standard library.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

MIGRATIONS_TABLE = "pathgrade_migrations"

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

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
CLUSTER_COMMENT = "pathgrade migrations, replicated on cluster "
"""The migrations table's comment on a cluster, followed by the cluster's name."""
REPLICA_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
"""ZooKeeper/Keeper path of each replicated table ({shard}, {replica}: server macros)."""
_CLUSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_CREATED = re.compile(
    r"^(\s*(?:CREATE\s+(?:TABLE|(?:MATERIALIZED\s+)?VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"|ALTER\s+TABLE\s+)[\w.`]+)",
    re.I,
)
_ENGINE = re.compile(r"\bENGINE\s*=\s*(?!Replicated)(\w*MergeTree)\b(?:\(([^()]*)\))?", re.I)


CONTENT_COLUMNS = (
    "ContentAttributes", "EventContentAttributes", "GenAIToolArguments", "GenAIToolResult",
    "GenAIInputMessages", "GenAIOutputMessages",
)  # fmt: skip
"""The `spans` columns holding captured content, cleared after the content retention."""
DEFAULT_CONTENT_RETENTION_DAYS = 7
DEFAULT_RETENTION_DAYS = 90
"""Migration 0010's retention: captured content, and span rows with their facts."""


class ClusterMismatch(RuntimeError):
    """The store was migrated for another cluster (or none) than the one asked for."""


class ClickHouseClient(Protocol):
    def command(self, cmd: str) -> Any: ...
    def query(self, query: str) -> Any: ...


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]

    def statements(self) -> list[str]:
        """The migration's statements, comments stripped, in file order."""
        body = "\n".join(
            line for line in self.sql.splitlines() if not line.lstrip().startswith("--")
        )
        return [s.strip() for s in re.split(r";\s*$", body, flags=re.M) if s.strip()]


def on_cluster(statement: str, cluster: str) -> str:
    """`statement` for a replicated cluster: `ON CLUSTER` after the name of the table or
    view it creates or alters, and each MergeTree engine as its Replicated twin at
    REPLICA_PATH. Raises ValueError for a cluster name that is not an identifier."""
    if not _CLUSTER_NAME.match(cluster):
        raise ValueError(f"cluster: expected a ClickHouse cluster name, got {cluster!r}")
    if not _CREATED.match(statement):
        return statement  # inserts and selects run where the client is connected
    statement = _CREATED.sub(rf"\1 ON CLUSTER '{cluster}'", statement, count=1)

    def replicated(engine: re.Match[str]) -> str:
        arguments = [f"'{REPLICA_PATH}'", "'{replica}'"] + ([engine[2]] if engine[2] else [])
        return f"ENGINE = Replicated{engine[1]}({', '.join(arguments)})"

    return _ENGINE.sub(replicated, statement)


def migrations_table_ddl(cluster: str | None) -> str:
    """The migrations table's DDL, for one server or (replicated, commented) a cluster."""
    if cluster is None:
        return _MIGRATIONS_TABLE_DDL
    return on_cluster(_MIGRATIONS_TABLE_DDL, cluster) + f"COMMENT '{CLUSTER_COMMENT}{cluster}'"


def migration_ddl(cluster: str | None = None, migrations: list[Migration] | None = None) -> str:
    """Every DDL statement `migrate(client, cluster=cluster)` runs on an empty database."""
    migrations = bundled_migrations() if migrations is None else migrations
    statements = [migrations_table_ddl(cluster).strip()] + [
        on_cluster(s, cluster) if cluster else s for m in migrations for s in m.statements()
    ]
    return "".join(f"{s};\n\n" for s in statements)


def retention_ddl(
    content_days: int = DEFAULT_CONTENT_RETENTION_DAYS,
    retention_days: int = DEFAULT_RETENTION_DAYS,
    cluster: str | None = None,
) -> list[str]:
    """The statements that keep captured content `content_days` and span rows (with
    their facts) `retention_days`, counted from when the collector received each span
    (`ReceivedAt`); ValueError unless 1 <= content_days <= retention_days."""
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
        f"ALTER TABLE spans MODIFY TTL toDateTime(ReceivedAt) + INTERVAL {retention_days} DAY",
        f"ALTER TABLE spans_trace_id_ts MODIFY TTL toDateTime(End) + INTERVAL {retention_days} DAY",
    ]
    return [on_cluster(s, cluster) if cluster else s for s in statements]


def set_retention(
    client: ClickHouseClient,
    content_days: int = DEFAULT_CONTENT_RETENTION_DAYS,
    retention_days: int = DEFAULT_RETENTION_DAYS,
) -> None:
    """Apply `retention_ddl` to a migrated store (on its cluster when it has one)."""
    cluster = recorded_cluster(migrations_table_comment(client))
    for statement in retention_ddl(content_days, retention_days, cluster):
        client.command(statement)


def recorded_cluster(comment: str | None) -> str | None:
    """The cluster a store was migrated for, from its migrations table's comment (None: one
    server, or not migrated yet)."""
    if comment and comment.startswith(CLUSTER_COMMENT):
        return comment[len(CLUSTER_COMMENT) :]
    return None


def migrations_table_comment(client: ClickHouseClient) -> str | None:
    """The migrations table's comment; None when the table does not exist yet."""
    rows = client.query(
        "SELECT comment FROM system.tables WHERE database = currentDatabase() "
        f"AND name = '{MIGRATIONS_TABLE}'"
    ).result_rows
    return rows[0][0] if rows else None


def bundled_migrations() -> list[Migration]:
    """The migrations shipped with pathgrade, ordered by version."""
    found = []
    for entry in resources.files("pathgrade.schemas").joinpath("migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def applied_versions(client: ClickHouseClient, cluster: str | None = None) -> dict[int, str]:
    """Version -> checksum of every migration already applied."""
    client.command(migrations_table_ddl(cluster))
    rows = client.query(f"SELECT Version, Checksum FROM {MIGRATIONS_TABLE} FINAL").result_rows
    return {int(version): checksum for version, checksum in rows}


def migrate(
    client: ClickHouseClient,
    migrations: list[Migration] | None = None,
    cluster: str | None = None,
) -> list[Migration]:
    """Apply every migration not yet applied, in order; return the ones applied now. With
    `cluster`, or on a store migrated for a cluster, every statement runs `on_cluster`.

    A migration whose recorded checksum differs from the shipped file is an error: shipped
    migrations are immutable, a change is a new migration. So is a `cluster` other than
    the one the store was migrated for (ClusterMismatch).
    """
    migrations = bundled_migrations() if migrations is None else migrations
    comment = migrations_table_comment(client)
    recorded = recorded_cluster(comment)
    if cluster is not None and recorded != cluster and comment is not None:
        where = f"cluster {recorded}" if recorded else "one server (no cluster)"
        raise ClusterMismatch(
            f"--cluster {cluster}: this database was migrated for {where}; "
            "its tables cannot be moved onto a cluster by migrating again"
        )
    cluster = cluster or recorded
    done = applied_versions(client, cluster)
    applied = []
    for migration in migrations:
        recorded = done.get(migration.version)
        if recorded is not None:
            if recorded != migration.checksum:
                raise RuntimeError(
                    f"migration {migration.version:04d}_{migration.name} was applied with "
                    f"checksum {recorded} but the shipped file has {migration.checksum}; "
                    "shipped migrations must not change, add a new one"
                )
            continue
        for statement in migration.statements():
            client.command(on_cluster(statement, cluster) if cluster else statement)
        client.command(
            f"INSERT INTO {MIGRATIONS_TABLE} (Version, Name, Checksum) VALUES "
            f"({migration.version}, '{migration.name}', '{migration.checksum}')"
        )
        applied.append(migration)
    return applied
