"""Anyone's SQL runs read-only on a session of its own: every kind of statement a reader
may send is refused or answered there, and the writer's session (the store writer's, the
alert sink's, the dataset commands') keeps writing, with nothing of the reader's on it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pathgrade.batch_plane.store.client import ClientStore, QueryError, StatementRefused
from pathgrade.batch_plane.store.reads import refusal

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

REFUSED_BY_CLICKHOUSE = [
    "SELECT 1 SETTINGS readonly = 0",
    "SELECT 1 SETTINGS max_threads = 1",
    "SELECT * FROM file('/etc/passwd', 'LineAsString')",
    "SELECT * FROM url('http://127.0.0.1:9/')",
    "SELECT throwIf(1)",
    "SELECT NoSuchColumn FROM spans",
    "SELEC 1",
    "SELECT 1; DROP TABLE spans",
]
REFUSED_AS_NOT_A_READ = [
    "DROP TABLE spans",
    "CREATE TABLE made_by_a_reader (a Int8) ENGINE = Memory",
    "INSERT INTO alerts (AlertKey) VALUES ('forged')",
    "ALTER TABLE spans DELETE WHERE 1",
    "TRUNCATE TABLE alerts",
    "OPTIMIZE TABLE spans FINAL",
    "SYSTEM STOP MERGES",
    "SET readonly = 0",
    "SET max_threads = 1",
    "SET param_tenant = 'other'",
    "USE system",
    "KILL QUERY WHERE 1",
    "SELECT 1 INTO OUTFILE '{out}'",
    "SELECT 1 PARALLEL WITH SELECT 2",
    "SELECT 1 FORMAT JSON",
]


def writer_can_write(store: ClientStore, key: str) -> bool:
    """The writer's session has no reader setting and inserts (then reads back) a row."""
    (readonly,) = store.query("SELECT getSetting('readonly')").rows[0]
    store.insert(
        "judge_cache", [[key, "m", "v1", "{}"]], ["CacheKey", "Model", "RubricVersion", "Output"]
    )
    found = store.query("SELECT count() FROM judge_cache WHERE CacheKey = {k:String}", {"k": key})
    return readonly == 0 and found.rows[0][0] == 1


@pytest.mark.parametrize("statement", REFUSED_BY_CLICKHOUSE + REFUSED_AS_NOT_A_READ)
def test_no_reader_statement_reaches_the_writer_session(
    store: ClientStore, statement: str, tmp_path: Path
) -> None:
    statement = statement.format(out=tmp_path / "written.bin")
    with pytest.raises(QueryError) as refused:
        store.query(statement, readonly=True)
    if statement in REFUSED_AS_NOT_A_READ or "OUTFILE" in statement:
        assert isinstance(refused.value, StatementRefused)
    assert writer_can_write(store, f"after {statement}")
    reader = store.query(
        "SELECT getSetting('readonly'), currentDatabase(), count() FROM spans", readonly=True
    ).rows[0]
    assert reader[:2] == [1, "default"]  # the reader session is as it was opened
    tables = {name for (name,) in store.query("SHOW TABLES", readonly=True).rows}
    assert {"spans", "alerts"} <= tables and "made_by_a_reader" not in tables
    assert not (tmp_path / "written.bin").exists()


def test_errors_show_the_statement_and_clickhouses_reason_only(store: ClientStore) -> None:
    for statement, reason in [
        ("SELEC 1", "Syntax error: failed at position 7 (1): 1."),
        ("SELECT 1; SELECT 2", "Multi-statements are not allowed"),
        ("SELECT NoSuchColumn FROM spans", "In scope SELECT NoSuchColumn FROM spans."),
    ]:
        with pytest.raises(QueryError) as failed:
            store.query(statement, readonly=True)
        message = str(failed.value)
        assert reason in message and message.startswith("Code: ")
        for appended in ("FORMAT Native", "formatQuerySingleLine", "SETTINGS readonly"):
            assert appended not in message


def test_a_slow_read_does_not_hold_up_the_writer(store: ClientStore) -> None:
    slow = threading.Thread(target=lambda: store.query("SELECT sleep(3)", readonly=True))
    slow.start()
    try:
        while not store.query(
            "SELECT count() FROM system.processes WHERE query LIKE 'SELECT sleep(3)%'"
        ).rows[0][0]:
            pass
        assert writer_can_write(store, "during a slow read")
        assert slow.is_alive()  # the writer did not wait for the read
    finally:
        slow.join()


def test_reads_answer_on_the_reader_session(store: ClientStore) -> None:
    answered = store.query(
        "WITH {n:UInt8} AS n SELECT n, 'it''s', getSetting('readonly')", {"n": 7}, readonly=True
    )
    assert answered.rows == [[7, "it's", 1]]
    assert store.query("DESCRIBE TABLE spans", readonly=True).rows
    assert store.query("EXPLAIN SELECT 1", readonly=True).rows
    assert store.query("EXISTS TABLE alerts", readonly=True).rows == [[1]]


@pytest.mark.parametrize(
    ("canonical", "reason"),
    [
        ("SELECT 'INTO OUTFILE', `PARALLEL WITH` FROM t", None),
        ("SELECT format('{}', 'x') FROM t", None),
        ("SELECT FORMAT FROM t", "FORMAT clause"),  # an identifier in upper case: refused
        ("SELECT 1 FORMAT CSV SETTINGS max_threads = 1", "FORMAT clause"),
        ("SELECT 1 UNION ALL SELECT 2 INTO OUTFILE 'x' TRUNCATE", "INTO OUTFILE"),
        ("SHOW TABLES INTO OUTFILE 'x'", "INTO OUTFILE"),
        ("WITH 1 AS a SELECT a PARALLEL WITH SELECT 2", "PARALLEL WITH"),
        ("KILL QUERY WHERE 1 ASYNC", "not KILL"),
        ("", "not an empty statement"),
    ],
)
def test_refusal_reads_the_canonical_statement(canonical: str, reason: str | None) -> None:
    found = refusal(canonical)
    assert found is None if reason is None else reason in (found or "")
