"""Every read is checked against ClickHouse's own syntax tree of it: no session reaches a
file, a URL, another host, a dictionary or another table's rows through a function or a
table function, and a tenant's session reads only its own rows, however the statement is
written (sub-queries, CTEs, views, `IN table`, joins, DESCRIBE, EXPLAIN, parameters)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pathgrade.batch_plane.store.client import ClientStore, QueryError, StatementRefused
from pathgrade.batch_plane.store.read_policy import (
    CatalogueEntry,
    FunctionCatalogue,
    ReadScope,
    policy_refusal,
)
from pathgrade.batch_plane.store.statement_tree import references

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

SECRET = "planted-secret-7c1e"


@pytest.fixture(scope="module")
def planted(store: ClientStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Alerts and spans of tenants `acme` (1 row each) and `globex` (2 rows each), and a
    file on the host holding SECRET."""
    store.insert(
        "alerts",
        [["k-a", "acme", "PG110", "t-a"], ["k-g1", "globex", "PG110", "t-g1"],
         ["k-g2", "globex", "PG110", "t-g2"]],
        ["AlertKey", "Tenant", "Code", "TraceId"],
    )  # fmt: skip
    store.insert(
        "spans",
        [["acme", "a" * 32, "1" * 16, "acme-only"], ["globex", "b" * 32, "2" * 16, "g1"],
         ["globex", "c" * 32, "3" * 16, "g2"]],
        ["Tenant", "TraceId", "SpanId", "SpanName"],
    )  # fmt: skip
    path = tmp_path_factory.mktemp("host") / "secret.txt"
    path.write_text(SECRET + "\n")
    return path


FILE_READS = [
    "SELECT file('{path}')",
    "SELECT lower(file('{path}'))",
    "SELECT `file`('{path}')",
    "SELECT length(file('{path}')) > 0",
    "SELECT 1 WHERE file('{path}') != ''",
    "SELECT * FROM spans WHERE SpanName IN (SELECT file('{path}'))",
    "WITH x AS (SELECT file('{path}') AS f) SELECT * FROM x",
    "WITH file('{path}') AS f SELECT f",
    "SELECT arrayMap(x -> file(x), ['{path}'])",
    "SELECT * APPLY(file) FROM (SELECT '{path}' AS p)",
    "SELECT COLUMNS('p') APPLY(file) FROM (SELECT '{path}' AS p)",
    "SELECT * APPLY(x -> file(x)) FROM (SELECT '{path}' AS p)",
    "SELECT * FROM view(SELECT file('{path}'))",
    "SELECT * FROM file('{path}', 'LineAsString')",
    "SELECT * FROM file('{path}', 'CSVWithNames')",
    "DESCRIBE TABLE file('{path}', 'TSVWithNames')",
    "DESCRIBE file('{path}', 'CSVWithNames')",
    "DESCRIBE (SELECT file('{path}'))",
    "EXPLAIN SELECT file('{path}')",
    "EXPLAIN PLAN SELECT * FROM file('{path}', 'LineAsString')",
    "EXPLAIN QUERY TREE SELECT file('{path}')",
    "SELECT * FROM url('file://{path}', 'LineAsString')",
    "SELECT * FROM fileCluster('default', '{path}', 'LineAsString')",
    "SELECT * FROM s3('http://127.0.0.1:9/{path}', 'LineAsString')",
    "SELECT * FROM executable('cat {path}', 'LineAsString', 'x String')",
    "SELECT * FROM remote('127.0.0.1', system.one)",
    "SELECT * FROM mysql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "SELECT * FROM postgresql('127.0.0.1:9', 'db', 't', 'u', 'p')",
    "SELECT * FROM input('x String')",
    "SELECT * FROM python('x')",
    "SELECT * FROM merge(currentDatabase(), '^alerts$')",
    "SELECT count() FROM merge('^spans$')",
    "SELECT dictGet('d', 'a', toUInt64(1))",
    "SELECT joinGet('alerts', 'Code', 'k-a')",
    "SELECT hasColumnInTable(currentDatabase(), 'spans', 'Tenant')",
    "SELECT getServerSetting('user_files_path')",
    "SELECT hostName(), FQDN()",
    "SELECT showCertificate()",
    "SELECT filesystemAvailable()",
    "SELECT aiGenerate('x')",
    "SELECT regionToName(toUInt32(1))",
    "SELECT getMacro('shard')",
]


@pytest.mark.parametrize("statement", FILE_READS)
@pytest.mark.parametrize("tenant", [None, "acme"], ids=["owner", "tenant"])
def test_no_read_reaches_a_file_a_host_a_dictionary_or_other_tables(
    store: ClientStore, planted: Path, statement: str, tenant: str | None
) -> None:
    with pytest.raises(StatementRefused) as refused:
        store.query(statement.format(path=planted), readonly=True, tenant=tenant)
    assert SECRET not in str(refused.value)
    assert "not allowed" in str(refused.value) or "not a read" in str(refused.value)


TENANT_ESCAPES = [
    "SELECT sum(rows) FROM system.parts WHERE table = 'alerts'",
    "SELECT total_rows FROM system.tables WHERE name = 'alerts'",
    "SELECT data_compressed_bytes FROM system.columns WHERE table = 'alerts'",
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM INFORMATION_SCHEMA.COLUMNS",
    "SELECT query FROM system.processes",
    "SELECT count() FROM system.query_log",
    "SELECT * FROM judge_cache",
    "SELECT * FROM default.judge_cache",
    "SELECT count() FROM trace_roots_mv",
    "SELECT count() FROM alerts WHERE AlertKey IN (SELECT CacheKey FROM judge_cache)",
    "SELECT 'k-g1' IN judge_cache",
    "SELECT count() FROM alerts WHERE 1 IN system.parts",
    "WITH judge_cache AS (SELECT 1 AS a) SELECT * FROM judge_cache",
    "SELECT * FROM (WITH webhook_cursors AS (SELECT 1) SELECT 1), webhook_cursors",
    "SELECT count() FROM {table:Identifier}",
    "SELECT count() FROM other_database.alerts",
    "SHOW TABLES",
    "SHOW PROCESSLIST",
    "SHOW CREATE TABLE alerts",
    "EXPLAIN ESTIMATE SELECT * FROM alerts",
    "EXPLAIN indexes = 1 SELECT * FROM alerts",
    "DESCRIBE TABLE system.parts",
    "SELECT count() FROM alerts SETTINGS additional_table_filters = {}",
]


@pytest.mark.parametrize("statement", TENANT_ESCAPES)
def test_a_tenants_session_reads_only_its_own_filtered_tables(
    store: ClientStore, planted: Path, statement: str
) -> None:
    del planted
    with pytest.raises(StatementRefused):
        store.query(statement, {"table": "system.parts"}, readonly=True, tenant="acme")


TENANT_READS = [
    ("SELECT count() FROM alerts", 1),
    ("SELECT count() FROM default.alerts", 1),
    ("SELECT count() FROM alerts_view", 1),
    ("SELECT count() FROM alerts FINAL", 1),
    ("SELECT count() FROM view(SELECT * FROM alerts)", 1),
    ("WITH x AS (SELECT * FROM alerts) SELECT count() FROM x", 1),
    ("WITH x AS (SELECT * FROM spans) SELECT count() FROM x AS a JOIN spans AS b USING TraceId",
     1),
    ("SELECT count() FROM spans WHERE TraceId IN (SELECT TraceId FROM alerts)", 0),
    ("SELECT countIf(Tenant != 'acme') FROM (SELECT Tenant FROM spans UNION ALL "
     "SELECT Tenant FROM alerts)", 0),
    ("SELECT count() FROM spans WHERE (Tenant, SpanName) IN "
     "(SELECT Tenant, SpanName FROM spans)", 1),
    ("WITH ids AS (SELECT TraceId FROM spans) SELECT count() FROM spans WHERE TraceId IN ids",
     1),
    ("SELECT uniqExactIf(TraceId, Tenant = 'globex') FROM spans", 0),
    ("SELECT count() FROM numbers(3)", 3),
    ("SELECT count() FROM system.one", 1),
    ("SELECT count() > 0 FROM system.functions WHERE name = 'file'", 1),
]  # fmt: skip


@pytest.mark.parametrize(("statement", "expected"), TENANT_READS)
def test_a_tenants_reads_answer_with_its_own_rows(
    store: ClientStore, planted: Path, statement: str, expected: int
) -> None:
    del planted
    assert store.query(statement, readonly=True, tenant="acme").rows == [[expected]]


def test_a_tenant_may_describe_and_ask_what_exists(store: ClientStore) -> None:
    described = store.query("DESCRIBE TABLE spans", readonly=True, tenant="acme")
    assert "Tenant" in [row[0] for row in described.rows]
    assert store.query("EXISTS TABLE alerts", readonly=True, tenant="acme").rows == [[1]]


def test_the_owner_reads_every_table_but_no_file(store: ClientStore, planted: Path) -> None:
    assert store.query("SELECT count() FROM alerts", readonly=True).rows == [[3]]
    assert store.query(
        "SELECT sum(rows) > 0 FROM system.parts WHERE table = 'alerts'", readonly=True
    ).rows == [[1]]
    assert store.query("SHOW TABLES", readonly=True).rows
    assert store.query("EXPLAIN SELECT count() FROM alerts", readonly=True).rows
    assert store.query("SHOW CREATE TABLE alerts", readonly=True).rows
    with pytest.raises(StatementRefused, match=r"function file\(\) is not allowed"):
        store.query(f"SELECT file('{planted}')", readonly=True)


def test_pathgrade_reads_with_the_functions_its_pages_use(store: ClientStore) -> None:
    answered = store.query(
        "SELECT quantile(0.5)(x), countIf(x > 1), sumArray([x]), argMax(x, x), "
        "uniqExactStateIf(x, 1) IS NOT NULL, toStartOfInterval(now(), INTERVAL 1 MINUTE) "
        "<= now(), JSONExtractString('{\"a\": \"b\"}', 'a'), multiIf(max(x) = 2, 'z', 'n'), "
        "arrayFilter(y -> y > 0, [0, 1]), COUNT(*), lcase('A'), formatReadableSize(1024), "
        "getSetting('readonly') FROM (SELECT number AS x FROM numbers(3))",
        readonly=True,
        tenant="acme",
    )
    assert answered.rows == [[1.0, 1, 3, 2, True, True, "b", "z", [1], 3, "a", "1.00 KiB", 1]]


def test_a_refusal_names_what_and_why(store: ClientStore) -> None:
    for statement, reason in [
        ("SELECT file('x')", "function file() is not allowed"),
        ("SELECT * FROM merge('^x$')", "table function merge() is not allowed"),
        ("SELECT * FROM system.parts", "table system.parts is not readable on a tenant's"),
        ("SHOW TABLES", "SHOW is not a read this session runs"),
    ]:
        with pytest.raises(StatementRefused, match=reason.replace("(", r"\(").replace(")", r"\)")):
            store.query(statement, readonly=True, tenant="acme")


def test_a_bad_statement_still_gets_clickhouses_reason(store: ClientStore) -> None:
    with pytest.raises(QueryError) as failed:
        store.query("SELECT NoSuchColumn FROM spans", readonly=True, tenant="acme")
    assert not isinstance(failed.value, StatementRefused)
    assert "UNKNOWN_IDENTIFIER" in str(failed.value)


def catalogue() -> FunctionCatalogue:
    entries = [
        CatalogueEntry("sum", True, False, "", "Aggregate Functions"),
        CatalogueEntry("count", True, True, "", "Aggregate Functions"),
        CatalogueEntry("lower", False, True, "", "String"),
        CatalogueEntry("lcase", False, True, "lower", ""),
        CatalogueEntry("file", False, False, "", "Other"),
        CatalogueEntry("toTypeName", False, False, "", "Other"),
        CatalogueEntry("dictGet", False, False, "", "Dictionary"),
    ]
    return FunctionCatalogue(entries, ["If", "Array", "State", "OrNull"])


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("sum", True), ("sumIf", True), ("sumArrayIf", True), ("COUNT", True), ("countOrNull", True),
     ("LCASE", True), ("toTypeName", True), ("lambda", True), ("file", False), ("FILE", False),
     ("fileIf", False), ("dictGet", False), ("lowerIf", False), ("unknownFunction", False),
     ("If", False)],
)  # fmt: skip
def test_the_catalogue_allows_computing_functions_only(name: str, allowed: bool) -> None:
    assert catalogue().allows(name) is allowed


def select_of(expression: dict) -> dict:
    """The tree of `SELECT <expression>`."""
    query = {"type": "SelectQuery", "select": {"children": [expression]}}
    return {"type": "SelectWithUnionQuery", "list_of_selects": {"children": [query]}}


def test_syntax_the_walk_does_not_know_is_refused() -> None:
    """A node kind the walk was not written for could reach a function some new way."""
    novel = {"type": "SomeNewTransformer", "func_name": "file"}
    refused = policy_refusal(
        references(select_of(novel)), ReadScope(None, "default"), catalogue(), frozenset
    )
    assert "SomeNewTransformer, which reads do not run" in (refused or "")


def test_the_policy_reads_the_tree_not_the_text() -> None:
    """A name in a string literal or an alias is no reference; the same name called is."""
    literal = {"type": "Literal", "value": {"value": "file('/etc/shadow')"}, "alias": "file"}
    called = {"type": "Function", "name": "file", "arguments": {"children": []}}
    scope = ReadScope("acme", "default")
    assert policy_refusal(references(select_of(literal)), scope, catalogue(), frozenset) is None
    refused = policy_refusal(references(select_of(called)), scope, catalogue(), frozenset)
    assert "file()" in (refused or "")


def test_a_statement_checked_for_the_owner_is_checked_again_for_a_tenant(
    store: ClientStore,
) -> None:
    """Checks are remembered per statement text and kind of session: what the owner may
    run once is still refused on a tenant's session, every time."""
    statement = "SELECT sum(rows) >= 0 FROM system.parts WHERE table = 'alerts'"
    for _ in range(2):
        assert store.query(statement, readonly=True).rows == [[1]]
        with pytest.raises(StatementRefused, match=r"system\.parts"):
            store.query(statement, readonly=True, tenant="acme")
