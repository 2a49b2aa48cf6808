"""The SQL insert path's pure parts: framing, parsing and the flattened-message check,
the statement's sources, the generated schema, and what a server is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.protobuf.internal.decoder import _DecodeVarint
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.batch_plane.store.client import ClientStore, QueryError, content_named_file
from pathgrade.batch_plane.store.genai_sql import FLATTENED
from pathgrade.batch_plane.store.otlp_insert import (
    INPUT_TABLE_PREFIX,
    INSERT_SETTINGS,
    LINK_OUTSIDE,
    REFUSAL_ERROR,
    REFUSALS_TABLE,
    SPAN_ATTRIBUTES,
    UNNAMED,
    framed_value,
    input_table,
    input_table_ddl,
    insert_messages,
    insert_statement,
    naming_statement,
    pending_message,
    refusal_named,
    refusals,
    span_rows_select,
)
from pathgrade.batch_plane.store.otlp_proto import (
    RECEIVED_AT_FIELD,
    TENANT_FIELD,
    spans_value_proto,
)
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS
from pathgrade.schemas.decline import Declined


def _traces(*attributes: tuple[str, str], spans_per_resource: tuple[int, ...] = (1,)) -> bytes:
    traces = TracesData()
    for count in spans_per_resource:
        scope = traces.resource_spans.add().scope_spans.add()
        for _ in range(count):
            span = scope.spans.add(name="s", trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
            for key, text in attributes:
                span.attributes.add(key=key, value=AnyValue(string_value=text))
    return traces.SerializeToString()


def test_a_framed_value_is_length_delimited_and_still_the_same_traces() -> None:
    value = _traces(("k", "v"))
    framed = framed_value(value, "acme", 1_700_000_000_000_000_123)
    length, start = _DecodeVarint(framed, 0)
    assert length == len(framed) - start
    body = framed[start:]
    assert body.startswith(value)
    parsed = TracesData.FromString(body)  # the two extra fields are unknown ones here
    assert list(parsed.resource_spans) == list(TracesData.FromString(value).resource_spans)
    assert b"acme" in body[len(value) :]


def test_pending_message_counts_every_span_and_refuses_what_is_not_otlp() -> None:
    pending = pending_message(_traces(spans_per_resource=(2, 3)), "t", 5)
    assert (pending.spans, pending.tenant, pending.received_at_ns) == (5, "t", 5)
    assert pending.sql_readable
    with pytest.raises(ValueError, match="not OTLP TracesData"):
        pending_message(b"\xff\xff not OTLP", "t", 5)


def test_a_flattened_message_key_leaves_the_sql_but_the_same_text_in_a_value_does_not() -> None:
    flattened = pending_message(_traces(("llm.input_messages.0.message.role", "user")), "t", 1)
    assert not flattened.sql_readable
    named_in_a_fact = _traces(("pathgrade.facts.pii.dropped", '{"llm.input_messages.0.x":{}}'))
    assert pending_message(named_in_a_fact, "t", 1).sql_readable


def test_the_insert_goes_into_the_input_table_whose_view_writes_every_spans_column() -> None:
    table = input_table()
    assert table.startswith(INPUT_TABLE_PREFIX) and table == input_table()
    assert insert_statement("input") == f"INSERT INTO {table} FORMAT Protobuf"
    embedded = insert_statement("file:/tmp/it's.data")
    assert embedded.startswith(f"INSERT INTO {table} SELECT * FROM ")
    assert "file('/tmp/it\\'s.data', 'Protobuf', '" in embedded
    create_table, create_view = input_table_ddl()
    assert create_table.startswith(f"CREATE TABLE IF NOT EXISTS {table} (")
    assert create_table.endswith(") ENGINE = Null")
    assert create_view.startswith(f"CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_mv TO spans")
    assert f"\nFROM {table}\n" in create_view
    assert all(f" AS `{column}`" in create_view for column in SPAN_COLUMNS)


def test_the_schema_carries_tenant_and_receive_time_and_its_file_is_named_by_content(
    tmp_path: Path,
) -> None:
    proto = spans_value_proto()
    assert proto.startswith('syntax = "proto3";')
    for name, number in (TENANT_FIELD, RECEIVED_AT_FIELD):
        assert f" {name} = {number};" in proto
    path = content_named_file(str(tmp_path), proto)
    assert content_named_file(str(tmp_path), proto) == path
    assert Path(path).read_text() == proto
    assert content_named_file(str(tmp_path), proto + "\n") != path


class _RecordingServer:
    """Stands for a clickhouse-connect client of a server: records what the store sends
    (no server is installable here; what a server does with it is untested)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, bytes | None, dict[str, Any]]] = []

    def command(self, cmd: str, data: bytes | None = None, settings: dict | None = None) -> None:
        self.commands.append((cmd, data, settings or {}))


def test_a_server_gets_the_values_with_the_statement_and_the_schema_inline() -> None:
    server = _RecordingServer()
    value = _traces(("k", "v"))
    assert insert_messages(ClientStore(server, server), [pending_message(value, "acme", 7)]) == [1]
    [(statement, data, settings)] = server.commands
    assert statement == insert_statement("input")
    assert data == framed_value(value, "acme", 7)
    assert settings == {
        **INSERT_SETTINGS,
        "format_schema_source": "string",
        "format_schema": spans_value_proto(),
    }


class _FreshServer(_RecordingServer):
    """Has no input table until a statement creates it (`missing` names the table its
    first insert does not find: the input table, or another)."""

    def __init__(self, missing: str) -> None:
        super().__init__()
        self.missing = missing

    def command(self, cmd: str, data: bytes | None = None, settings: dict | None = None) -> None:
        super().command(cmd, data, settings)
        if cmd.startswith("CREATE TABLE"):
            self.missing = ""
        elif cmd.startswith("INSERT") and self.missing:
            raise RuntimeError(f"Code: 60. Table default.{self.missing} does not exist. "
                               "(UNKNOWN_TABLE)")  # fmt: skip


def test_a_store_without_the_input_table_gets_it_and_the_insert_once_more() -> None:
    server = _FreshServer(input_table())
    value = _traces(("k", "v"))
    assert insert_messages(ClientStore(server, server), [pending_message(value, "acme", 7)]) == [1]
    statements = [cmd for cmd, _, _ in server.commands]
    assert statements == [insert_statement("input"), *input_table_ddl(), insert_statement("input")]
    assert server.commands[-1][1] == framed_value(value, "acme", 7)
    other = _FreshServer("spans")  # another table missing: not this path's to create
    with pytest.raises(QueryError, match="spans does not exist"):
        insert_messages(ClientStore(other, other), [pending_message(value, "acme", 7)])
    assert len(other.commands) == 1


class _RefusingServer(_RecordingServer):
    """Refuses, as the insert's throwIf does, every batch holding a marked value, naming
    the refusal of the first marked value it holds (`MARKS`)."""

    def command(self, cmd: str, data: bytes | None = None, settings: dict | None = None) -> None:
        super().command(cmd, data, settings)
        for mark, refusal in MARKS.items():
            if data is not None and mark in data:
                named = f"{REFUSAL_ERROR}: {refusal.reason}"
                raise RuntimeError(f"Code: 395. DB::Exception: {named}: while executing")


MARKS = {b"refuse-me": SPAN_ATTRIBUTES, b"refuse-link": LINK_OUTSIDE, b"unknown": Declined("?")}


def test_on_a_server_halving_finds_the_refused_values_and_their_refusals() -> None:
    server = _RefusingServer()
    marks = {2: "refuse-me", 5: "refuse-link"}
    values = [_traces(("k", marks.get(i, f"v{i}"))) for i in range(8)]
    values[6] = _traces(("gen_ai.prompt.0.content", "hi"))  # flattened: never sent
    messages = [pending_message(v, "acme", 1) for v in values]
    answers = insert_messages(ClientStore(server, server), messages)
    assert answers == [1, 1, SPAN_ATTRIBUTES, 1, 1, LINK_OUTSIDE, FLATTENED, 1]
    assert answers[2] is SPAN_ATTRIBUTES and answers[6] is FLATTENED  # the shared instances
    inserted = [data for _, data, _ in server.commands if data and b"refuse-" not in data]
    assert b"".join(inserted) == b"".join(
        framed_value(v, "acme", 1) for i, v in enumerate(values) if i not in (2, 5, 6)
    )


def test_an_error_naming_no_refusal_of_the_insert_propagates() -> None:
    server = _RefusingServer()
    with pytest.raises(QueryError, match=REFUSAL_ERROR):
        insert_messages(
            ClientStore(server, server), [pending_message(_traces(("k", "unknown")), "acme", 1)]
        )


def test_the_insert_refuses_on_nine_conditions_each_naming_its_own() -> None:
    reasons = [declined.reason for declined, _ in refusals()]
    assert len(reasons) == len(set(reasons)) == 9
    assert [refusal_named(f"x {REFUSAL_ERROR}: {r}: while") for r in reasons] == [
        d for d, _ in refusals()
    ]
    assert refusal_named(f"{REFUSAL_ERROR}: while executing") is None


def test_a_batch_of_declined_messages_alone_sends_nothing() -> None:
    server = _RecordingServer()
    flattened = pending_message(_traces(("llm.input_messages.0.message.role", "u")), "acme", 1)
    assert insert_messages(ClientStore(server, server), [flattened]) == [FLATTENED]
    assert server.commands == []


class _InsertOnlyRefusingServer(_RefusingServer):
    """Refuses the insert (as `_RefusingServer`) but not the statement naming the refusal."""

    def command(self, cmd: str, data: bytes | None = None, settings: dict | None = None) -> None:
        if cmd.startswith(f"INSERT INTO {REFUSALS_TABLE}"):
            self.commands.append((cmd, data, settings))
            return
        super().command(cmd, data, settings)


def test_a_lone_refused_value_is_named_by_a_statement_of_its_own() -> None:
    """The insert checks its conditions with one throwIf (its analysis is every insert's
    cost); a refused value is named by a second statement, one throwIf per condition."""
    server = _RefusingServer()
    message = pending_message(_traces(("k", "refuse-link")), "acme", 1)
    assert insert_messages(ClientStore(server, server), [message]) == [LINK_OUTSIDE]
    insert, naming = (cmd for cmd, _, _ in server.commands)
    assert insert == insert_statement("input") and naming == naming_statement("input")
    assert naming.count("throwIf(") == len(refusals()) == 9
    assert span_rows_select(input_table()).count("throwIf(") == 1
    quiet = _InsertOnlyRefusingServer()
    assert insert_messages(ClientStore(quiet, quiet), [message]) == [UNNAMED]


OVER_LIMIT = (
    "Code: 241. DB::Exception: (total) memory limit exceeded: would use 300.00 MiB, "
    "maximum: 256.00 MiB. (MEMORY_LIMIT_EXCEEDED)"
)


class _MemoryCappedServer(_RecordingServer):
    """Refuses, as ClickHouse past its memory limit does, every insert of more than
    `cap` bytes of values."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap

    def command(self, cmd: str, data: bytes | None = None, settings: dict | None = None) -> None:
        super().command(cmd, data, settings)
        if data is not None and len(data) > self.cap:
            raise RuntimeError(OVER_LIMIT)


def test_an_insert_over_the_memory_limit_is_halved_until_the_halves_fit() -> None:
    values = [_traces(("k", f"v{i}")) for i in range(8)]
    framed = [framed_value(v, "acme", 1) for v in values]
    server = _MemoryCappedServer(cap=len(b"".join(framed[:2])))
    messages = [pending_message(v, "acme", 1) for v in values]
    assert insert_messages(ClientStore(server, server), messages) == [1] * 8
    inserted = [data for _, data, _ in server.commands if data and len(data) <= server.cap]
    assert b"".join(inserted) == b"".join(framed)  # every value once, in order
    assert len(inserted) == 4


def test_one_value_over_the_memory_limit_fails_the_insert_as_any_error_does() -> None:
    value = _traces(("k", "v" * 100))
    server = _MemoryCappedServer(cap=10)
    with pytest.raises(QueryError, match="MEMORY_LIMIT_EXCEEDED"):
        insert_messages(ClientStore(server, server), [pending_message(value, "acme", 1)] * 2)
