"""The sharded layout (`pathgrade migrate --cluster NAME --shards`) on chDB: its DDL is
drift-tested against deploy/clickhouse/sharded.sql, applied to one chDB server, and every
query pathgrade runs over the browser UI's seeded data (tests/unit/pathgrade/web), the
gate's inputs, webhook delivery, the judge's cache and `pathgrade alerts` runs on it and on
the unsharded store with the same rows, and must answer the same (the results exporter's
reads, whose rows carry their insert time, on the sharded store alone).

chDB is one server and knows no cluster: each `Distributed('pathgrade', db, X_local, key)`
table is created as `remote('127.0.0.1', db, X_local, key)`, the same Distributed storage
over a one-shard cluster of this server, so inserts are routed through it to the local
tables (materialized views and TTLs on those), and reads, FINAL and sub-queries go through
it. What one shard cannot show (rows of one trace on two shards) is ruled out by the
sharding keys (test_sharding_keys_keep_a_traces_rows_and_a_rows_duplicates_together)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import clickhouse_connect
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.batch_plane.evaluation.gate_inputs import (
    run_expected_calls,
    run_scores,
    run_usage,
    trace_calls,
)
from pathgrade.batch_plane.scoring.calibration import calibration_status
from pathgrade.batch_plane.scoring.judge import JudgeCache, Usage, Verdict
from pathgrade.batch_plane.store.alerts import follow_statement
from pathgrade.batch_plane.store.client import ClientStore, QueryError, open_client_store
from pathgrade.batch_plane.store.cluster_ddl import EVERYWHERE, SHARDING_KEYS, TRACE_KEY, local_name
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.batch_plane.store.migration_runner import (
    MIGRATIONS_TABLE,
    migrate,
    migration_ddl,
    migrations_table_comment,
    recorded_layout,
    set_retention,
)
from pathgrade.batch_plane.store.otlp_insert import insert_messages, pending_message
from pathgrade.batch_plane.store.results_backlog import Cursor, ResultsBacklog
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.realtime_plane.delivery import AlertBacklog
from pathgrade.schemas.alerts import ALERT_COLUMNS, SEQ_COLUMNS
from pathgrade.schemas.migrations import CONTENT_COLUMNS, bundled_migrations
from pathgrade.schemas.store import QueryResult
from starlette.testclient import TestClient

from pathgrade.cli.alerts import alerts_query
from pathgrade.cli.main import main
from tests.support.paths import REPO_ROOT
from tests.unit.pathgrade.web.test_web_pages import FORM, client, seeded, tokens_client

__all__ = ["client", "seeded", "tokens_client"]  # the web pages' fixtures, over `store` here

SHARDED_DDL = REPO_ROOT / "deploy" / "clickhouse" / "sharded.sql"
ON_CLUSTER = re.compile(r" ON CLUSTER '[^']*'")
REPLICATED = re.compile(r"ENGINE = Replicated(\w+)\('[^']*', '[^']*'(?:, )?")
DISTRIBUTED = re.compile(
    r"AS \w+\nENGINE = Distributed\('[^']*', (currentDatabase\(\)), (\w+), (.*)\)$", re.S
)


def one_server_form(statement: str) -> str:
    """A sharded-layout statement as one chDB server runs it: no ON CLUSTER, plain
    MergeTree engines, each Distributed table over the one local shard (`remote`)."""
    statement = REPLICATED.sub(r"ENGINE = \1(", ON_CLUSTER.sub("", statement))
    return DISTRIBUTED.sub(r"AS remote('127.0.0.1', \1, \2, \3)", statement)


class OneServer:
    """A client running every command in `one_server_form`."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def command(self, statement: str) -> Any:
        return self.client.command(one_server_form(statement))

    def query(self, query: str) -> Any:
        return self.client.query(query)


def _rows(result: QueryResult, ordered: bool) -> tuple[list[str], list[str]]:
    rows = [repr(row) for row in result.rows]
    return result.columns, rows if ordered else sorted(rows)


@dataclass
class TwinStore:
    """A `Store` running every statement on the unsharded and the sharded store: inserts
    go to both, a query's answer is the unsharded one, and each query whose rows (in order
    when it orders them) or failure differ on the sharded store is kept in `differences`."""

    plain: ClientStore
    sharded: ClientStore
    queries: list[str] = field(default_factory=list)
    differences: list[tuple[str, Any, Any]] = field(default_factory=list)

    def query(self, sql: str, parameters: dict[str, Any] | None = None,
              readonly: bool = False, tenant: str | None = None) -> QueryResult:  # fmt: skip
        answers: list[Any] = []
        for store in (self.plain, self.sharded):
            try:
                answers.append(store.query(sql, parameters, readonly=readonly, tenant=tenant))
            except QueryError as exc:
                answers.append(exc)
        self.queries.append(sql)
        expected, got = answers
        ordered = "ORDER BY" in sql.upper()
        if isinstance(expected, Exception) or isinstance(got, Exception):
            if type(expected) is not type(got):
                self.differences.append((sql, expected, got))
        elif _rows(expected, ordered) != _rows(got, ordered):
            self.differences.append((sql, expected.rows, got.rows))
        if isinstance(expected, Exception):
            raise expected
        return expected

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        for store in (self.plain, self.sharded):
            store.insert(table, rows, column_names)

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[Any]:
        rejected = self.plain.insert_encodable(table, rows, column_names)
        assert self.sharded.insert_encodable(table, rows, column_names) == rejected
        return rejected


@pytest.fixture(scope="module", name="store")
def twin_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinStore]:
    """The unsharded store (database `plain`) and the sharded one (database `sharded`,
    migrated with `--cluster pathgrade --shards` in one_server_form) in one chDB."""
    path = tmp_path_factory.mktemp("twin") / "clickhouse"
    boot = clickhouse_connect.get_client(dsn=f"chdb://{path}")
    for database in ("plain", "sharded"):
        boot.command(f"CREATE DATABASE IF NOT EXISTS {database}")
    plain, sharded = (
        open_client_store(f"chdb://{path}?database={db}") for db in ("plain", "sharded")
    )
    migrate(plain.client)
    migrate(OneServer(sharded.client), cluster="pathgrade", shards=True)
    yield TwinStore(plain, sharded)
    for store in (plain, sharded):
        store.close()
    boot.close()


def test_sharded_ddl_parses_decides_every_table_and_matches_the_deploy_file(
    store: TwinStore,
) -> None:
    plain, sharded = migration_ddl(), migration_ddl("pathgrade", shards=True)
    # regenerate: pathgrade migrate --cluster pathgrade --shards --print-sql
    assert SHARDED_DDL.read_text() == sharded
    for statement in (s for s in sharded.split(";\n\n") if s.strip()):  # as written
        store.plain.client.query("SELECT formatQuery({q:String})", parameters={"q": statement})
    for table, key in SHARDING_KEYS.items():
        local = local_name(table)
        assert f"CREATE TABLE IF NOT EXISTS {local} ON CLUSTER 'pathgrade'" in sharded
        distributed = f"Distributed('pathgrade', currentDatabase(), {local}, {key})"
        create = f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER 'pathgrade' AS {local}\n"
        assert f"{create}ENGINE = {distributed}" in sharded
    for table in EVERYWHERE:
        assert f"CREATE TABLE IF NOT EXISTS {table} ON CLUSTER 'pathgrade'\n" in sharded
    created = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", plain)
    assert sorted(created) == sorted([*SHARDING_KEYS, *EVERYWHERE])  # every table decided
    for view in re.findall(r"CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+)", plain):
        statement = re.search(rf"CREATE MATERIALIZED VIEW IF NOT EXISTS {view} .*?;", sharded,
                              re.S)[0]  # fmt: skip
        assert re.search(r"\nFROM (spans|scores)_local\b", statement)  # the shard's own rows
        assert re.search(r" TO \w+_local AS", statement)
    assert "ALTER TABLE spans ON CLUSTER 'pathgrade' MODIFY TTL" not in sharded
    assert "ALTER TABLE spans_local ON CLUSTER 'pathgrade' MODIFY TTL" in sharded
    for dropped in re.findall(r"DROP TABLE IF EXISTS (\w+)", plain):  # both, Distributed first
        assert (
            f"DROP TABLE IF EXISTS {dropped} ON CLUSTER 'pathgrade';\n\n"
            f"DROP TABLE IF EXISTS {local_name(dropped)} ON CLUSTER 'pathgrade';"
        ) in sharded


def test_the_cli_prints_the_sharded_ddl_and_refuses_shards_without_a_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["migrate", "--cluster", "pathgrade", "--shards", "--print-sql"]) == 0
    assert capsys.readouterr().out == SHARDED_DDL.read_text()
    assert main(["migrate", "--shards", "--print-sql"]) == 2
    assert "--shards needs --cluster NAME" in capsys.readouterr().err


def test_sharding_keys_keep_a_traces_rows_and_a_rows_duplicates_together() -> None:
    """A trace's rows share one key; each key reads only columns of the table's dedup key,
    or columns those determine (ScoreId and a finding's AlertKey hash the trace id; whether
    an AlertKey is a coverage gap's, read from Details, is fixed by the key)."""
    trace_tables = ("spans", "trace_times", "trace_roots", "scores")
    assert all(SHARDING_KEYS[t] == TRACE_KEY for t in trace_tables)
    assert "TraceId" in SHARDING_KEYS["alerts"] and "AlertKey" in SHARDING_KEYS["alerts"]
    plain = migration_ddl()
    for table, key in SHARDING_KEYS.items():
        order = re.search(rf"CREATE TABLE IF NOT EXISTS {table}\n.*?ORDER BY \(?([\w, ]+)",
                          plain, re.S)[1]  # fmt: skip
        dedup = {c.strip() for c in order.split(",")}
        used = set(re.findall(r"\b[A-Z]\w*\b", key)) - {"JSONExtractBool"}
        determined = {"scores": {"TraceId"}, "alerts": {"TraceId", "Details"}}.get(table, set())
        assert used <= dedup | determined, (table, key)


def test_every_query_of_the_ui_gate_delivery_and_cli_answers_the_same_on_shards(
    store: TwinStore, seeded: dict[str, list[str]], client: TestClient,
    tokens_client: TestClient,
) -> None:  # fmt: skip
    now = time.time_ns()
    gap = '{"coverage_gap": true}'  # the third: a coverage gap's, sharded by its AlertKey
    numbered = [[f"seq-{n}", "a", "PG110", "orphan-write", "high", "violation", "r",
                 seeded["a"][n], "", "svc", "agent", "", "medium", "default",
                 gap if n == 2 else "{}", 0, now, now, now + n, "", "", 3, n + 1]
                for n in range(3)]  # fmt: skip
    seeded_alerts = store.sharded.query("SELECT count() FROM alerts_local FINAL").rows[0][0]
    store.insert_encodable("alerts", numbered, [*ALERT_COLUMNS, *SEQ_COLUMNS])
    assert store.sharded.query("SELECT count() FROM alerts_local FINAL").rows[0][0] == (
        seeded_alerts + 3
    )
    spans = store.plain.query(f"SELECT {', '.join(SPAN_COLUMNS)} FROM spans LIMIT 3").rows
    assert store.insert_encodable("spans", spans, list(SPAN_COLUMNS)) == []  # a replay
    conversation = store.plain.query(
        "SELECT any(GenAIConversationId) FROM spans WHERE GenAIConversationId != ''"
    ).rows[0][0]
    assert conversation
    pages = [
        f"/conversation/{conversation}", "/alerts?from=30d",
        "/traces?from=1d", "/traces?from=1d&code=PG110", "/traces?from=1d&tool=issue_refund",
        "/traces?from=1d&min_cost=0.001", "/traces?from=1d&q=refund", "/alerts?from=1d",
        "/runs", "/datasets", "/edge", "/review", "/health", "/detectors",
        "/dataset?name=golden/a&version=1", "/dataset-item/i1",
        "/compare?candidate=run-a&baseline=run-b", *(f"/trace/{t}" for t in seeded["a"][:4]),
        f"/trace/{seeded['b'][0]}",
    ]  # fmt: skip
    for path in pages:
        assert client.get(path).status_code in (200, 404), path
    tokens_client.post("/login", content="token=tok-a&next=/traces", headers=FORM)
    for path in pages:  # every query of tenant a's viewer, under its tenant filter
        assert tokens_client.get(path).status_code in (200, 404), path
    tokens_client.cookies.clear()
    assert run_scores(store, "run-a")
    run_usage(store, "run-a")
    run_expected_calls(store, "run-a")
    assert trace_calls(store, seeded["a"][:5])
    backlog = AlertBacklog(AlertRecords(store), "http://hook.example/")
    backlog.save({3: 2})
    assert AlertRecords(store).latest_numbers() == {3: 3} and backlog.cursors() == {3: 2}
    assert [n for n, _ in backlog.read(3, 1, 3, 10)] == [1, 2, 3]
    store.query(*alerts_query(None, "PG110", 50), readonly=True)
    assert len(store.query(follow_statement("PG110"), {"since": 0, "code": "PG110"}).rows) == 5
    cache = JudgeCache(store)  # the judge's cache, sharded by its own key
    cache.put("key-1", "judge-model", "rubric@1", Verdict(score=1, explanation="ok"), Usage(9))
    assert cache.get("key-1") and cache.get("key-2") is None
    assert calibration_status(store, "judge-model", "rubric@1") is False
    store.query(f"SELECT Version FROM {MIGRATIONS_TABLE} FINAL ORDER BY Version")
    assert len(set(store.queries)) >= 40, len(set(store.queries))
    assert store.differences == []
    for table in ("spans", "trace_roots", "span_counts", "scores", "trace_times"):
        count = "SELECT count() FROM {} WHERE Tenant = 'a'"
        held = store.sharded.query(count.format(local_name(table))).rows[0][0]
        assert held == store.plain.query(count.format(table)).rows[0][0] > 0, table


def test_sub_queries_on_shards_read_the_shards_own_rows_in_every_session(
    store: TwinStore, seeded: dict[str, list[str]]
) -> None:
    """SESSION_SETTINGS in the writer's, the reader's and a tenant's session, set before
    the reader's read-only mode; the local tables are filtered by tenant too."""
    setting = (
        "SELECT getSetting('distributed_product_mode'), "
        "getSetting('distributed_foreground_insert'), getSetting('readonly')"
    )
    assert store.sharded.query(setting).rows == [["local", True, 0]]
    assert store.sharded.query(setting, readonly=True).rows == [["local", True, 1]]
    assert store.sharded.query(setting, tenant="a").rows == [["local", True, 1]]
    tenants = "SELECT DISTINCT Tenant FROM spans_local ORDER BY Tenant"
    assert store.sharded.query(tenants).rows == [["a"], ["b"]]
    assert store.sharded.query(tenants, tenant="a").rows == [["a"]]  # local tables filtered


def test_a_sharded_store_keeps_its_layout_for_later_migrations(store: TwinStore) -> None:
    client = store.sharded.client
    layout = recorded_layout(migrations_table_comment(client))
    assert (layout.cluster, layout.shards) == ("pathgrade", True)
    assert migrate(OneServer(client)) == []  # up to date, on its recorded layout
    later = bundled_migrations()[-1]
    with pytest.raises(Exception, match="sharded cluster pathgrade"):
        migrate(OneServer(client), [later], cluster="pathgrade")  # not replicated
    set_retention(OneServer(client), 3, 30)  # `pathgrade migrate --retention-days` on shards
    query = "SELECT create_table_query FROM system.tables WHERE name = {name:String} AND "
    query += "database = currentDatabase()"
    local = client.query(query, parameters={"name": "spans_local"}).result_rows[0][0]
    assert "toDateTime(ReceivedAt) + toIntervalDay(30)" in local
    assert local.count("TTL toDateTime(ReceivedAt) + toIntervalDay(3)") == len(CONTENT_COLUMNS)


def test_the_sql_insert_path_writes_through_the_distributed_spans(store: TwinStore) -> None:
    """The store writer's SQL insert (batch_plane.store.otlp_insert) on a sharded store
    goes through the Distributed `spans` to the local tables and their views, with the
    rows the Python path writes on the unsharded store."""
    now = time.time_ns()  # rows older than the retention's 90 days are dropped at once
    traces = TracesData()
    scope = traces.resource_spans.add().scope_spans.add()
    for n in range(3):
        span = scope.spans.add(name="chat m", trace_id=bytes([n + 1]) * 16, span_id=b"\x02" * 8,
                               start_time_unix_nano=now + n)  # fmt: skip
        span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
    message = pending_message(traces.SerializeToString(), "sql-path", now)
    assert insert_messages(store.sharded, [message]) == [message.spans]
    rows = [span_row(s) for s in decode_resource_spans(
        traces.resource_spans, message.tenant, message.received_at_ns)]  # fmt: skip
    assert store.plain.insert_encodable("spans", rows, list(SPAN_COLUMNS)) == []
    for table in ("spans", "trace_roots", "span_counts"):
        query = "SELECT * EXCEPT Tenant FROM {} WHERE Tenant = 'sql-path' ORDER BY ALL"
        local = store.sharded.query(query.format(local_name(table))).rows
        assert local == store.plain.query(query.format(table)).rows != [], table


def test_the_results_exporters_reads_run_on_the_distributed_tables(
    store: TwinStore, seeded: dict[str, list[str]]
) -> None:
    """The results exporter reads scores and alerts past a cursor through the Distributed
    tables (each row's StoredAt taken when it was inserted into them) and keeps its cursors
    in a table replicated everywhere."""
    exported = ResultsBacklog(store.sharded, "sharded", ["a"], 64)
    now = exported.now_ns()
    scores = exported.rows_after("scores", Cursor(0), now, 1000)
    stored = store.sharded.query("SELECT count() FROM scores WHERE Tenant = 'a'").rows[0][0]
    assert len(scores) == stored > 0 and {row.fields["Tenant"] for row in scores} == {"a"}
    assert [row.cursor for row in scores] == sorted(row.cursor for row in scores)
    assert all(0 < row.cursor.stored_at_ns <= now for row in scores)
    assert exported.rows_after("scores", scores[0].cursor, now, 1000) == scores[1:]
    assert exported.rows_after("alerts", Cursor(0), now, 1000)
    seconds = {row.cursor.stored_at_ns // 10**9 for row in scores}
    counts = exported.counts_by_second("scores", min(seconds), max(seconds))
    assert sum(counts.values()) == len(scores)
    exported.save({"scores": scores[0].cursor})
    exported.save({"scores": scores[-1].cursor, "alerts": Cursor(now)})
    assert exported.cursors() == {"scores": scores[-1].cursor, "alerts": Cursor(now)}
