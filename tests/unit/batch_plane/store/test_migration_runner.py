"""The migrations' runner: a statement laid out on a cluster, the cluster DDL drift-tested
against the deploy file, and a store migrated for a cluster kept on it."""

from __future__ import annotations

import re

import pytest
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.cluster_ddl import REPLICA_PATH, on_cluster
from pathgrade.batch_plane.store.migration_runner import (
    CLUSTER_COMMENT,
    MIGRATIONS_TABLE,
    ClusterMismatch,
    migrate,
    migration_ddl,
    migrations_table_comment,
    recorded_layout,
)
from pathgrade.schemas.migrations import Migration, bundled_migrations

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.paths import REPO_ROOT

DEPLOY_DDL = REPO_ROOT / "deploy" / "clickhouse" / "cluster.sql"


def test_on_cluster_adds_on_cluster_and_replicated_engines_only_to_ddl() -> None:
    table = "CREATE TABLE IF NOT EXISTS t\n(a UInt8)\nENGINE = ReplacingMergeTree(a)\nORDER BY a"
    assert on_cluster(table, "prod") == (
        "CREATE TABLE IF NOT EXISTS t ON CLUSTER 'prod'\n(a UInt8)\n"
        f"ENGINE = ReplicatedReplacingMergeTree('{REPLICA_PATH}', '{{replica}}', a)\nORDER BY a"
    )
    bare = on_cluster("CREATE TABLE x (a UInt8) ENGINE = AggregatingMergeTree ORDER BY a", "c")
    assert bare.endswith(f"ENGINE = ReplicatedAggregatingMergeTree('{REPLICA_PATH}', "
                         "'{replica}') ORDER BY a")  # fmt: skip
    assert bare.startswith("CREATE TABLE x ON CLUSTER 'c' (")
    view = "CREATE MATERIALIZED VIEW IF NOT EXISTS v TO t AS SELECT 1"
    assert (
        on_cluster(view, "c")
        == "CREATE MATERIALIZED VIEW IF NOT EXISTS v ON CLUSTER 'c' TO t AS SELECT 1"
    )
    assert on_cluster("ALTER TABLE t ADD COLUMN b UInt8", "c") == (
        "ALTER TABLE t ON CLUSTER 'c' ADD COLUMN b UInt8"
    )
    done = "CREATE TABLE r (a UInt8) ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY a"
    assert on_cluster(done, "c").endswith("ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY a")
    drop = "DROP TABLE IF EXISTS t"
    assert on_cluster(drop, "c") == "DROP TABLE IF EXISTS t ON CLUSTER 'c'"
    assert on_cluster("DROP VIEW v", "c") == "DROP VIEW v ON CLUSTER 'c'"
    insert = "INSERT INTO t VALUES (1)"
    assert on_cluster(insert, "c") == insert
    with pytest.raises(ValueError, match="cluster name"):
        on_cluster(table, "prod'; DROP TABLE spans --")


def test_cluster_ddl_parses_replicates_every_table_and_matches_the_deploy_file(
    store: ClientStore,
) -> None:
    plain, clustered = migration_ddl(), migration_ddl("pathgrade")
    statements = [s for s in clustered.split(";\n\n") if s.strip()]
    for statement in statements:  # ClickHouse's own parser accepts each one
        store.client.query("SELECT formatQuery({q:String})", parameters={"q": statement})
    assert len(statements) == len([s for s in plain.split(";\n\n") if s.strip()])
    ddl = [s for s in statements if not s.startswith("INSERT")]  # a backfill runs once
    assert ddl != statements and all("ON CLUSTER 'pathgrade'" in s for s in ddl)
    engines = re.findall(r"ENGINE = (\w+)", plain)
    assert engines and re.findall(r"ENGINE = (\w+)", clustered) == [
        f"Replicated{e}" for e in engines
    ]
    assert (
        DEPLOY_DDL.read_text() == clustered
    )  # regenerate: pathgrade migrate --cluster pathgrade --print-sql


def test_a_store_migrated_for_a_cluster_keeps_migrating_on_it(store: ClientStore) -> None:
    """Later migrations follow the cluster the migrations table records; asking for another
    cluster than the one recorded is refused."""
    client = store.client
    assert recorded_layout(migrations_table_comment(client)).cluster is None
    with pytest.raises(ClusterMismatch, match="one server"):
        migrate(client, cluster="prod")
    client.command(f"ALTER TABLE {MIGRATIONS_TABLE} MODIFY COMMENT '{CLUSTER_COMMENT}prod'")
    try:
        assert recorded_layout(migrations_table_comment(client)).cluster == "prod"
        later = Migration(99, "later", "CREATE TABLE IF NOT EXISTS t99 (a UInt8) "
                                       "ENGINE = MergeTree ORDER BY a;")  # fmt: skip
        with pytest.raises(Exception, match="cluster 'prod'"):  # chDB has no cluster 'prod'
            migrate(client, [*bundled_migrations(), later])
        with pytest.raises(ClusterMismatch, match="cluster prod"):
            migrate(client, cluster="other")
    finally:
        client.command(f"ALTER TABLE {MIGRATIONS_TABLE} MODIFY COMMENT ''")
