"""How a migration statement is laid out on a ClickHouse cluster: replicated, or sharded.

Replicated (`on_cluster`): every table ON CLUSTER with its MergeTree engine's Replicated
twin at REPLICA_PATH, one replica set per shard.

Sharded (`on_shards`): each table in SHARDING_KEYS becomes a replicated local table
`<name>_local` on every shard and a `Distributed` table under the name pathgrade's queries
use, which routes each inserted row to a shard by the table's sharding key and reads every
shard. The trace-keyed tables share one key, `cityHash64(TraceId)`, so a trace's spans,
trace-list rows, scores and alerts live on one shard (a sub-query on one of them filtering
another one reads the shard's own rows: `distributed_product_mode = 'local'`). Every
sharding key is a function of the table's ReplacingMergeTree key, so a row's duplicates
land on one shard and FINAL (run on each shard) removes them. Materialized views read and
write the local tables of their shard; ALTERs apply to the local table and, for the column
changes, to the Distributed one, whose columns follow. The other tables (EVERYWHERE) are
small records read by key from any server: one replica set over the whole cluster
(EVERYWHERE_PATH), no Distributed table, so every server holds all their rows.
"""

from __future__ import annotations

import re

REPLICA_PATH = "/clickhouse/tables/{shard}/{database}/{table}"
"""ZooKeeper/Keeper path of each replicated table ({shard}, {replica}: server macros)."""
EVERYWHERE_PATH = "/clickhouse/tables/all/{database}/{table}"
"""Keeper path of a sharded cluster's table replicated on every server (EVERYWHERE)."""
EVERYWHERE_REPLICA = "{shard}-{replica}"
"""Replica name of such a table: unique over the cluster, not only within a shard."""
LOCAL_SUFFIX = "_local"
"""A sharded table's local table is `<name>_local` on each shard."""

TRACE_KEY = "cityHash64(TraceId)"
SHARDING_KEYS = {
    "spans": TRACE_KEY,  # dedup key (Tenant, TraceId, SpanId)
    "spans_trace_id_ts": TRACE_KEY,  # (Tenant, TraceId); filled from the shard's spans
    "trace_times": TRACE_KEY,  # (Tenant, TraceId); the same (replaces spans_trace_id_ts)
    "trace_roots": TRACE_KEY,  # (Tenant, Timestamp, TraceId, SpanId); from the shard's spans
    "trace_facets": TRACE_KEY,  # (Tenant, Facet, Value, Timestamp, TraceId); the same
    "conversation_traces": TRACE_KEY,  # (Tenant, ConversationId, TraceId); the same
    "feedback_spans": TRACE_KEY,  # (Tenant, TraceId, SpanId); the same
    "tool_spans": TRACE_KEY,  # (Tenant, TraceId, SpanId); the same
    "logs": TRACE_KEY,  # dedup key (Tenant, TraceId, SpanId, Timestamp, RecordHash)
    "scores": TRACE_KEY,  # ScoreId hashes the trace id with the score's other identity
    "trace_scores": TRACE_KEY,  # (Tenant, TraceId, Metric, ScoreId); from the shard's scores
    # AlertKey hashes the finding's trace id, except a coverage gap's: one per (tenant,
    # service, code, window), anchored to whichever trace opened the window, so it is
    # sharded by its own key (any consumer's copy lands on the same shard)
    "alerts": "cityHash64(if(JSONExtractBool(Details, 'coverage_gap'), AlertKey, TraceId))",
    "span_counts": "rand()",  # SummingMergeTree read with sum(): a row may be on any shard
    "monitor_rollups": "rand()",  # the same
    "trace_counts": "rand()",  # AggregatingMergeTree of sets read merged: the same
    "monitor_ticks": "cityHash64(Monitor, Scope)",  # dedup key (Tenant, Monitor, Scope, TickNs)
    "judge_cache": "cityHash64(CacheKey)",  # one verdict per CacheKey
    "judge_calls": "cityHash64(CallId)",  # one row per call
}
"""Sharded tables and their sharding key (a function of the columns they were created
with: a Distributed table's key cannot change)."""
EVERYWHERE = (
    "pathgrade_migrations", "datasets", "dataset_items", "runs", "gates", "gate_rows",
    "judge_calibrations", "webhook_cursors", "export_cursors",
)  # fmt: skip
"""Tables replicated on every server of a sharded cluster (small, read by key)."""

_CLUSTER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_CREATED = re.compile(
    r"^(\s*(?:CREATE\s+(?:TABLE|(?:MATERIALIZED\s+)?VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"|ALTER\s+TABLE\s+|DROP\s+(?:TABLE|VIEW)\s+(?:IF\s+EXISTS\s+)?)[\w.`]+)",
    re.I,
)
_ENGINE = re.compile(r"\bENGINE\s*=\s*(?!Replicated)(\w*MergeTree)\b(?:\(([^()]*)\))?", re.I)
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.I)
_ALTER_TABLE = re.compile(r"^\s*ALTER\s+TABLE\s+(\w+)\s+", re.I)
_DROP_TABLE = re.compile(r"^\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(\w+)\s*$", re.I)
_MATERIALIZED_VIEW = re.compile(r"^\s*CREATE\s+MATERIALIZED\s+VIEW\b", re.I)
_TABLE_REFERENCE = re.compile(r"\b(TO|FROM)\s+(\w+)\b", re.I)
_COLUMN_CHANGE = re.compile(
    r"^(?:ADD\s+COLUMN|MODIFY\s+COLUMN\s+(?:IF\s+EXISTS\s+)?\w+\s+(?!TTL\b|REMOVE\b))", re.I
)  # a column's addition, or a change of its type or default (not of its TTL)


def _checked(cluster: str) -> str:
    if not _CLUSTER_NAME.match(cluster):
        raise ValueError(f"cluster: expected a ClickHouse cluster name, got {cluster!r}")
    return cluster


def _replicated(statement: str, cluster: str, path: str, replica: str) -> str:
    """`statement` ON CLUSTER, each MergeTree engine as its Replicated twin at `path`."""
    if not _CREATED.match(statement):
        return statement  # inserts and selects run where the client is connected
    statement = _CREATED.sub(rf"\1 ON CLUSTER '{_checked(cluster)}'", statement, count=1)

    def replicated(engine: re.Match[str]) -> str:
        arguments = [f"'{path}'", f"'{replica}'"] + ([engine[2]] if engine[2] else [])
        return f"ENGINE = Replicated{engine[1]}({', '.join(arguments)})"

    return _ENGINE.sub(replicated, statement)


def on_cluster(statement: str, cluster: str) -> str:
    """`statement` for a replicated cluster: `ON CLUSTER` after the name of the table or
    view it creates, alters or drops, and each MergeTree engine as its Replicated twin at
    REPLICA_PATH. Raises ValueError for a cluster name that is not an identifier."""
    _checked(cluster)
    return _replicated(statement, cluster, REPLICA_PATH, "{replica}")


def local_name(table: str) -> str:
    """The local table a sharded table's Distributed table routes to."""
    return table + LOCAL_SUFFIX


def distributed_ddl(table: str, cluster: str) -> str:
    """The Distributed table `table` over its local tables on `cluster`."""
    local = local_name(table)
    return (
        f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER '{cluster}' AS {local}\n"
        f"ENGINE = Distributed('{cluster}', currentDatabase(), {local}, "
        f"{SHARDING_KEYS[table]})"
    )


def _localised(statement: str) -> str:
    """A materialized view's statement reading and writing its shard's local tables."""

    def local(reference: re.Match[str]) -> str:
        name = reference[2]
        return f"{reference[1]} {local_name(name) if name in SHARDING_KEYS else name}"

    return _TABLE_REFERENCE.sub(local, statement)


def _alter_commands(commands: str) -> list[str]:
    """An ALTER's comma-separated commands (commas inside parentheses and quotes kept)."""
    parts, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(commands):
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        elif not quoted and depth == 0 and char == ",":
            parts.append(commands[start:index].strip())
            start = index + 1
    return [*parts, commands[start:].strip()]


def _sharded_alter(table: str, commands: str, cluster: str) -> list[str]:
    """An ALTER of a sharded table: all of it on the local tables, its column additions
    and column type/default changes on the Distributed table too (not TTLs, indexes or
    sort keys, which only a MergeTree has)."""
    local = f"ALTER TABLE {local_name(table)} ON CLUSTER '{cluster}' {commands}"
    columns = [c for c in _alter_commands(commands) if _COLUMN_CHANGE.match(c)]
    if not columns:
        return [local]
    return [local, f"ALTER TABLE {table} ON CLUSTER '{cluster}' {', '.join(columns)}"]


def on_shards(statement: str, cluster: str) -> list[str]:
    """The statements that lay `statement` out on a sharded `cluster` (module docstring):
    a sharded table's CREATE as its local table and its Distributed table, its ALTER on
    both, its DROP of both, a materialized view on the local tables, a table of EVERYWHERE
    replicated on every server, anything else ON CLUSTER; inserts and selects unchanged."""
    _checked(cluster)
    if created := _CREATE_TABLE.match(statement):
        table = created[1]
        if table in SHARDING_KEYS:
            local = statement[: created.start(1)] + local_name(table) + statement[created.end(1) :]
            return [on_cluster(local, cluster), distributed_ddl(table, cluster)]
        if table not in EVERYWHERE:
            raise ValueError(f"sharding: table {table} is neither sharded nor everywhere")
        return [_replicated(statement, cluster, EVERYWHERE_PATH, EVERYWHERE_REPLICA)]
    altered = _ALTER_TABLE.match(statement)
    if altered and altered[1] in SHARDING_KEYS:
        return _sharded_alter(altered[1], statement[altered.end() :], cluster)
    dropped = _DROP_TABLE.match(statement)
    if dropped and dropped[1] in SHARDING_KEYS:
        local = statement[: dropped.start(1)] + local_name(dropped[1]) + statement[dropped.end(1) :]
        return [on_cluster(statement, cluster), on_cluster(local, cluster)]
    if _MATERIALIZED_VIEW.match(statement):
        return [on_cluster(_localised(statement), cluster)]
    return [on_cluster(statement, cluster)]
