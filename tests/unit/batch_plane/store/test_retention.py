"""Retention on chDB (migrations 0010, 0021): captured content is cleared after its TTL while
the span row and its facts stay; rows go after theirs, and the rows the views derived from
them with them; both are configurable."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.migration_runner import migrate, retention_ddl, set_retention
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.trace_rows import load_trace
from pathgrade.content.facts_producer import compute_facts
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas import genai
from pathgrade.schemas.migrations import SPAN_DERIVED_TTL, bundled_migrations
from pathgrade.schemas.model import GenAIFields, Span, SpanEvent

DAY_NS = 86_400 * 10**9
ARGUMENTS = '{"order_id": "ord-4242", "customer_id": "cust-7"}'


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    """A store with the shipped retention (7 days of content, 90 of rows)."""
    store = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("retention"))))
    migrate(store.client)
    yield store
    store.close()


def captured_tool_span(trace_id: str, age_days: float) -> Span:
    """A tool span with its content captured (arguments, result, identity, a content
    event) and the facts the collector records, started `age_days` ago."""
    start = time.time_ns() - int(age_days * DAY_NS)
    fields = GenAIFields(
        operation="execute_tool", tool_name="lookup_order", tool_arguments=ARGUMENTS,
        tool_result='{"status": "shipped"}', input_messages='[{"role": "user"}]',
    )  # fmt: skip
    attributes = {
        genai.TOOL_CALL_ARGUMENTS: ARGUMENTS,
        genai.ENDUSER_ID: "cust-7",
        genai.PG_TOOL_EFFECT: "read",
    }
    attributes.update(
        compute_facts(fields, attributes, FactSecret(b"r" * 32).for_tenant("t"), PiiScanner())
    )
    return Span(
        "t", trace_id, "01" * 8, "", "execute_tool lookup_order", "Internal", start,
        start + 1000, attributes=attributes, genai=fields, received_at_ns=start,
        events=[SpanEvent(start, genai.EVENT_USER_MESSAGE, {"content": "hi", "role": "user"})],
    )  # fmt: skip


def test_content_is_cleared_after_its_ttl_while_the_span_and_its_facts_remain(
    store: ClientStore,
) -> None:
    spans = {age: captured_tool_span(f"{age:032x}", age) for age in (1, 10, 100)}
    store.insert("spans", span_rows(list(spans.values())), list(SPAN_COLUMNS))
    store.client.command("OPTIMIZE TABLE spans FINAL")  # TTLs apply when parts merge

    fresh = load_trace(store, "t", spans[1].trace_id)
    assert fresh is not None
    (kept,) = fresh.spans
    assert kept.genai.tool_arguments == ARGUMENTS
    assert kept.attributes[genai.TOOL_CALL_ARGUMENTS] == ARGUMENTS
    assert kept.events[0].attributes == {"content": "hi", "role": "user"}

    aged = load_trace(store, "t", spans[10].trace_id)
    assert aged is not None
    (old,) = aged.spans
    assert (old.genai.tool_arguments, old.genai.tool_result, old.genai.input_messages) == (
        "", "", "",
    )  # fmt: skip
    assert genai.TOOL_CALL_ARGUMENTS not in old.attributes
    assert genai.ENDUSER_ID not in old.attributes
    assert old.events[0].name == genai.EVENT_USER_MESSAGE and old.events[0].attributes == {}
    assert old.attributes[genai.PG_TOOL_EFFECT] == "read"
    assert old.facts == spans[10].facts  # the facts outlive the content
    assert old.facts.arguments is not None and old.facts.session

    assert load_trace(store, "t", spans[100].trace_id) is None  # beyond the rows' 90 days
    for table in SPAN_DERIVED_TTL:  # the rows the views derived from the spans go with them
        store.client.command(f"OPTIMIZE TABLE {table} FINAL")
    derived = {
        "trace_roots": "TraceId = {trace:String}",
        "trace_facets": "TraceId = {trace:String}",
    }

    def rows_of(span: Span) -> dict[str, int]:
        values = {"trace": span.trace_id}
        return {
            table: store.query(f"SELECT count() FROM {table} WHERE {where}", values).rows[0][0]
            for table, where in derived.items()
        }

    assert rows_of(spans[100]) == {"trace_roots": 0, "trace_facets": 0}
    assert rows_of(spans[10]) == {"trace_roots": 1, "trace_facets": 1}


def test_content_is_stored_apart_from_the_other_attributes(store: ClientStore) -> None:
    span = captured_tool_span("ab" * 16, 0)
    store.insert("spans", span_rows([span]), list(SPAN_COLUMNS))
    row = store.query(
        "SELECT SpanAttributes, ContentAttributes, EventContentAttributes FROM spans "
        "WHERE TraceId = {t:String}",
        {"t": span.trace_id},
    ).rows[0]
    plain, content, events = row
    assert set(content) == {genai.TOOL_CALL_ARGUMENTS, genai.ENDUSER_ID}
    assert genai.PG_TOOL_EFFECT in plain and not set(plain) & set(content)
    assert any(key.startswith("pathgrade.facts.") for key in plain)
    assert events == [{"content": "hi", "role": "user"}]


def test_retention_is_configurable_and_the_migration_holds_the_defaults(
    store: ClientStore,
) -> None:
    (shipped,) = [m for m in bundled_migrations() if m.name == "retention"]
    (logs,) = [m for m in bundled_migrations() if m.name == "logs"]
    (derived,) = [m for m in bundled_migrations() if m.name == "derived_retention"]
    defaults = retention_ddl()
    (times,) = [m for m in bundled_migrations() if m.name == "trace_times"]
    of_spans = [s for s in defaults if s.split()[2] in ("spans", "trace_times")]
    renamed = [  # 0023's trace_times replaced spans_trace_id_ts, with the same TTL
        s.replace("spans_trace_id_ts", "trace_times") for s in shipped.statements()[2:]
    ]
    assert renamed == of_spans
    assert "TTL toDateTime(End) + INTERVAL 90 DAY" in times.statements()[0]
    assert derived.statements() == [
        s for s in defaults if s.split()[2] in ("trace_roots", "trace_facets")
    ]
    for table in ("conversation_traces", "feedback_spans", "tool_spans"):  # TTL in CREATE
        (created,) = [m for m in bundled_migrations() if m.name == table]
        ttl = "TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY"
        assert f"ALTER TABLE {table} MODIFY {ttl}" in defaults
        assert ttl in created.statements()[0]
    columns = [s for s in defaults if s.startswith("ALTER TABLE logs MODIFY COLUMN")]
    assert logs.statements()[1:] == columns  # and the table's TTL in its CREATE:
    assert "TTL toDateTime(ReceivedAt) + INTERVAL 90 DAY" in logs.statements()[0]
    set_retention(store.client, 3, 30)
    for table, content_columns in (("spans", 6), ("logs", 2)):
        ddl = store.query(f"SHOW CREATE TABLE {table}").rows[0][0]
        assert ddl.count("toIntervalDay(3)") == content_columns, table
        assert "TTL toDateTime(ReceivedAt) + toIntervalDay(30)" in ddl, table
    for table, counted_from in SPAN_DERIVED_TTL.items():
        ddl = store.query(f"SHOW CREATE TABLE {table}").rows[0][0]
        assert f"TTL {counted_from} + toIntervalDay(30)" in ddl, table
    times_ddl = store.query("SHOW CREATE TABLE trace_times").rows[0][0]
    assert "TTL toDateTime(End) + toIntervalDay(30)" in times_ddl
    set_retention(store.client)  # back to the defaults
    assert store.query("SHOW CREATE TABLE spans").rows[0][0].count("toIntervalDay(7)") == 6
    assert store.query("SHOW CREATE TABLE logs").rows[0][0].count("toIntervalDay(7)") == 2
    with pytest.raises(ValueError, match="no longer than the rows"):
        retention_ddl(30, 7)
    assert len(retention_ddl(1, 1)) == 11 + len(SPAN_DERIVED_TTL)  # one day of each is allowed
