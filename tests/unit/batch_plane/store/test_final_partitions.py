"""`FINAL` with a condition on time reads only the partitions the condition keeps, in every
session (client.SESSION_SETTINGS), and still keeps one row per key; a log record resent on
a later day (another `logs` partition) is still read once (trace_rows.LATEST_LOG_OF_EACH_KEY)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.log_rows import LOG_COLUMNS, log_row
from pathgrade.batch_plane.store.migration_runner import migrate
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.trace_rows import join_stored_records
from pathgrade.schemas.model import GenAIFields, LogRecord, Span, Trace

DAY_NS = 86_400 * 10**9
NOW_NS = time.time_ns()
TRACE = "ab" * 16


def chat(trace: str, number: int, days_ago: int) -> Span:
    start = NOW_NS - days_ago * DAY_NS
    return Span(
        "a", trace, f"{number:016x}", "", "chat", "Client", start, start + 1000,
        genai=GenAIFields(operation="chat"), received_at_ns=start,
    )  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """Spans on five days, today's stored twice (an at-least-once redelivery)."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("final"))))
    migrate(store.client)
    spans = [chat(f"{day:032x}", 1, day) for day in range(5)]
    for rows in (spans, spans[:1]):
        store.insert("spans", span_rows(rows), list(SPAN_COLUMNS))
    yield store
    store.close()


RECENT = "SELECT count() FROM spans FINAL WHERE Timestamp >= toStartOfDay(now())"


def parts_read(store: ClientStore, sql: str, readonly: bool) -> tuple[int, int]:
    """(parts read, parts in the table) of `sql` as EXPLAIN's first index (Min-Max)
    reports."""
    plan = "\n".join(
        row[0] for row in store.query(f"EXPLAIN indexes = 1 {sql}", readonly=readonly).rows
    )
    match = re.search(r"Parts: (\d+)/(\d+)", plan)
    assert match, plan
    return int(match[1]), int(match[2])


@pytest.mark.parametrize("readonly", [False, True], ids=["owner", "reader"])
def test_final_with_a_time_condition_reads_only_the_partitions_it_keeps(
    store: ClientStore, readonly: bool
) -> None:
    assert parts_read(store, RECENT, readonly) == (2, 6)  # today's two parts of six
    assert store.query(RECENT, readonly=readonly).rows == [[1]]  # its duplicate kept once


@pytest.mark.parametrize(
    "session", [{}, {"readonly": True}, {"tenant": "a"}], ids=["owner", "reader", "tenant"]
)
def test_every_session_keeps_final_within_partitions(
    store: ClientStore, session: dict[str, str | bool]
) -> None:
    """A tenant's session may not EXPLAIN: its setting is read instead."""
    setting = "SELECT getSetting('do_not_merge_across_partitions_select_final')"
    assert store.query(setting, **session).rows == [[True]]  # type: ignore[arg-type]


def test_a_log_record_resent_a_day_later_is_read_once(store: ClientStore) -> None:
    sent, resent = (
        LogRecord("a", TRACE, f"{1:016x}", NOW_NS - DAY_NS, 0, event_name="e", received_at_ns=at)
        for at in (NOW_NS - DAY_NS, NOW_NS)
    )
    store.insert("logs", [log_row(sent), log_row(resent)], list(LOG_COLUMNS))
    assert store.query("SELECT uniqExact(_partition_id) FROM logs").rows == [[2]]
    trace = Trace("a", TRACE, [chat(TRACE, 1, 1)])
    join_stored_records(store, [trace])
    assert [r.received_at_ns for s in trace.spans for r in s.records] == [NOW_NS]
