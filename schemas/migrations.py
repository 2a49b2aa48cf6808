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


def bundled_migrations() -> list[Migration]:
    """The migrations shipped with pathgrade, ordered by version."""
    found = []
    for entry in resources.files("schemas").joinpath("migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    return sorted(found, key=lambda m: m.version)


def applied_versions(client: ClickHouseClient) -> dict[int, str]:
    """Version -> checksum of every migration already applied."""
    client.command(_MIGRATIONS_TABLE_DDL)
    rows = client.query(f"SELECT Version, Checksum FROM {MIGRATIONS_TABLE} FINAL").result_rows
    return {int(version): checksum for version, checksum in rows}


def migrate(client: ClickHouseClient, migrations: list[Migration] | None = None) -> list[Migration]:
    """Apply every migration not yet applied, in order; return the ones applied now.

    A migration whose recorded checksum differs from the shipped file is an error: shipped
    migrations are immutable, a change is a new migration.
    """
    migrations = bundled_migrations() if migrations is None else migrations
    done = applied_versions(client)
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
            client.command(statement)
        client.command(
            f"INSERT INTO {MIGRATIONS_TABLE} (Version, Name, Checksum) VALUES "
            f"({migration.version}, '{migration.name}', '{migration.checksum}')"
        )
        applied.append(migration)
    return applied
