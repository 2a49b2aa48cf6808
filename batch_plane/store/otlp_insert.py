"""The store's insert path on ClickHouse's own Protobuf parsing.

The store writer hands a batch of `pathgrade.spans` values to ClickHouse as they came,
length-delimited, each with the tenant and receive time appended as two extra protobuf
fields (`batch_plane.store.otlp_proto`), in one insert into a Null table (`input_table`) whose
materialized view writes `spans`: its SELECT computes every column `span_rows.span_row`
computes in Python: ids as hex, attribute maps as text, content split out, GenAI and
evaluation columns (`batch_plane.store.genai_sql`, compiled from the same mapping as the Python
decoder). The store writer creates the table and its view when it starts (not a
migration: the view's SQL is compiled from the mapping, and a new one gets a new name).

The insert is a fast path beside `span_rows` (`schemas.decline`): `insert_messages`
answers per message, with its spans inserted or a `Declined`, and the store writer decodes
the declined ones in Python (counted). The SQL reads a subset of what OTLP can carry: a
message with flattened message keys (`genai_sql.FLATTENED`: `genai_sql.has_flattened_keys`)
never reaches the SQL, and the insert refuses the rest of what it does not read, on nine
conditions (`refusals`, each its own `Declined`): a span start or an event time past the
store's range; span, resource, event or link attributes with a value nested past arrays
of scalars, a map, arrays of floats or of strings that need JSON escaping, a float whose
text is not plain decimal or a repeated key; a `service.name` that is not a string; and
what the SQL mapping declines (`genai_sql.declines_sql`: non-string values of the keys
GenAI fields are read from, counts that are not ints or ASCII digits, a span kind that is
not ASCII). A refused message is declined naming the first of them its spans fail. Every
message is parsed in Python first (upb), so a malformed one never reaches, and never
fails, a batch insert.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from google.protobuf.internal.encoder import _VarintBytes
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.batch_plane.store.client import ClientStore, QueryError
from pathgrade.batch_plane.store.errors import over_memory_limit
from pathgrade.batch_plane.store.genai_sql import (
    ATTRIBUTE_ARRAYS,
    FLATTENED,
    ArrayAttributeSql,
    GenAISql,
    declines_sql,
    genai_sql,
    has_flattened_keys,
    quote,
)
from pathgrade.batch_plane.store.otlp_proto import (
    RECEIVED_AT_FIELD,
    ROOT_MESSAGE,
    TENANT_FIELD,
    spans_value_proto,
    spans_value_structure,
)
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS
from pathgrade.content.otlp import parse_spans_message
from pathgrade.schemas import genai as g
from pathgrade.schemas import genai_mapping as m
from pathgrade.schemas.decline import Decision, Declined
from pathgrade.schemas.model import MAX_TIME_NS, SPAN_KINDS, STATUS_CODES

PROTOBUF_SETTINGS: dict[str, str | int] = {
    "format_schema_message_name": ROOT_MESSAGE,
    "input_format_protobuf_oneof_presence": 1,
}
"""Settings of reading the framed values besides the schema itself (`spans_value_proto()`,
which `ClientStore.insert_select` sends inline to a server, as a file to chDB)."""

INSERT_SETTINGS: dict[str, str | int] = {**PROTOBUF_SETTINGS, "optimize_on_insert": 0}
"""The insert's settings: no ReplacingMergeTree pass over each inserted block (a copy of
every row: bench/insert_settings.py, 50,000 realistic spans per insert, 17.7 against 21.8
µs of CPU per span, medians of 5 alternating rounds, 2026-12-06):
a span in the batch twice is deduplicated by merges and `FINAL`, as one inserted twice by
two batches (an at-least-once redelivery) always was. The views' own `GROUP BY` already
aggregates what they write."""

INPUT_TABLE_PREFIX = "spans_input_"
"""The name of the store writer's input tables starts so (`input_table`)."""

SERVER_SETTINGS = ("format_schema_source", "input_format_protobuf_oneof_presence")
"""The settings the insert needs of ClickHouse (`format_schema_source` came with ClickHouse
pull request 80874, mid-2025; chDB 4.4's engine, 26.9, has both): looked up, not assumed
from a version."""


def missing_settings(store: ClientStore) -> list[str]:
    """The `SERVER_SETTINGS` the store's ClickHouse does not know (without them the insert
    cannot run there: the store writer decodes every batch in Python)."""
    known = store.query(
        "SELECT name FROM system.settings WHERE name IN {names:Array(String)}",
        {"names": list(SERVER_SETTINGS)},
    )
    return sorted(set(SERVER_SETTINGS) - {row[0] for row in known.rows})


_TENANT_TAG = _VarintBytes(TENANT_FIELD[1] << 3 | 2)
_RECEIVED_AT_TAG = _VarintBytes(RECEIVED_AT_FIELD[1] << 3 | 0)


def framed_value(value: bytes, tenant: str, received_at_ns: int) -> bytes:
    """`value` with tenant and receive time appended, length-delimited for the insert."""
    tenant_bytes = tenant.encode()
    value += _TENANT_TAG + _VarintBytes(len(tenant_bytes)) + tenant_bytes
    value += _RECEIVED_AT_TAG + _VarintBytes(received_at_ns)
    return _VarintBytes(len(value)) + value


@dataclass(slots=True)
class PendingMessage:
    """A parsed `pathgrade.spans` value pending insert: by the store's SQL (the value as
    it came) or decoded in Python (from `traces`, parsed once)."""

    value: bytes
    traces: TracesData
    tenant: str
    received_at_ns: int
    spans: int
    sql_readable: bool  # False: certainly outside what the SQL reads (`may_be_sql_readable`)


def pending_message(value: bytes, tenant: str, received_at_ns: int) -> PendingMessage:
    """`value` parsed; raises ValueError, as the Python decoder does, on bytes that are not
    OTLP TracesData, so a malformed value never fails a batch insert."""
    traces = parse_spans_message(value)
    spans = sum(len(s.spans) for r in traces.resource_spans for s in r.scope_spans)
    return PendingMessage(
        value, traces, tenant, received_at_ns, spans, may_be_sql_readable(value, traces)
    )


def insert_messages(store: ClientStore, messages: list[PendingMessage]) -> list[Decision[int]]:
    """Insert `messages` with the store's SQL; answers per message, in order: its spans
    inserted, or `Declined` (insert those in Python): `FLATTENED` (never sent: `sql_readable`
    is False) or the refusal its spans met first (`refusals`). Other errors propagate (parts
    already inserted are inserted again on a retry, which the ReplacingMergeTree absorbs)."""
    readable = [message for message in messages if message.sql_readable]
    refused = _insert_readable(store, readable) if readable else {}
    return [
        FLATTENED if not message.sql_readable else refused.get(id(message), message.spans)
        for message in messages
    ]


def _insert_readable(store: ClientStore, messages: list[PendingMessage]) -> dict[int, Declined]:
    """Insert `messages` with one statement; the ones the SQL refused (by `id`), each with
    its refusal. After a refusal, the store names the refused values and their refusals in
    one cheaper statement where it can read values in a SELECT (embedded chDB); elsewhere
    (a server reads them only in an INSERT) halving finds them, two statements per level,
    and one more names a lone refused value's refusal (`_refusal_of`). An insert the store's
    memory limit refuses (`over_memory_limit`: the embedded store's `store_memory_mb`) is
    halved too, until the halves fit."""
    data = b"".join(framed_value(m.value, m.tenant, m.received_at_ns) for m in messages)
    try:
        _insert_framed(store, data)
        return {}
    except QueryError as exc:
        if over_memory_limit(exc) and len(messages) > 1:
            middle = len(messages) // 2
            return _insert_readable(store, messages[:middle]) | _insert_readable(
                store, messages[middle:]
            )
        if REFUSAL_ERROR not in str(exc):
            raise
    if len(messages) == 1:
        return {id(messages[0]): _refusal_of(store, data)}
    rows = store.select_over(refused_statement, data, PROTOBUF_SETTINGS, spans_value_proto())
    if rows:  # named: insert the others (what is refused among them is found the same way)
        named = {number: refusals()[index][0] for number, index in rows}
        others = [m for number, m in enumerate(messages) if number not in named]
        refused = {id(messages[number]): reason for number, reason in named.items()}
        return refused | (_insert_readable(store, others) if others else {})
    middle = len(messages) // 2
    return _insert_readable(store, messages[:middle]) | _insert_readable(store, messages[middle:])


def _refusal_of(store: ClientStore, data: bytes) -> Declined:
    """The refusal of the framed value `data` the insert refused: the error of
    `naming_statement`, which checks each condition with a `throwIf` of its own (the
    insert checks them with one, `_refuse`)."""
    try:
        _with_table(store, REFUSALS_TABLE, create_refusals_table, naming_statement, data,
                    PROTOBUF_SETTINGS)  # fmt: skip
    except QueryError as exc:
        refusal = refusal_named(str(exc))
        if refusal is None:
            raise
        return refusal
    return UNNAMED


def _with_table(
    store: ClientStore, table: str, create: Callable[[ClientStore], None],
    statement: Callable[[str], str], data: bytes, settings: dict[str, str | int],
) -> None:  # fmt: skip
    """Run the insert `statement` of `data` into `table`, which `create` creates first
    where it is missing (a store the writer did not prepare: another server of the
    cluster, a test's)."""
    try:
        store.insert_select(statement, data, settings, spans_value_proto())
    except QueryError as exc:
        if "UNKNOWN_TABLE" not in str(exc) or table not in str(exc):
            raise
        create(store)
        store.insert_select(statement, data, settings, spans_value_proto())


def _insert_framed(store: ClientStore, data: bytes) -> None:
    """Insert framed values through `input_table()`, created first where it is missing."""
    _with_table(store, input_table(), create_input_table, insert_statement, data, INSERT_SETTINGS)


# --- what the SQL reads --------------------------------------------------------------------

_FLATTENED_PREFIXES = tuple(p.encode() for p in m.FLATTENED_PREFIXES)
REFUSAL_ERROR = "pathgrade: a span outside the SQL subset"
"""What the error the insert raises (throwIf) when a message is outside what the SQL reads
starts with; the refusal's reason follows (`refusal_named`)."""
START_PAST_RANGE = Declined("a span start past the store's time range")
EVENT_OUTSIDE = Declined("an event past the store's time range or with attributes it does not read")
LINK_OUTSIDE = Declined("a link with attributes the SQL insert does not read")
SPAN_ATTRIBUTES = Declined("span attributes the SQL insert does not read")
RESOURCE_ATTRIBUTES = Declined("resource attributes the SQL insert does not read")
SERVICE_NOT_TEXT = Declined("a service.name that is not a string")
UNNAMED = Declined("refused by the SQL insert, no condition named when checked again")
"""A refusal the naming statement did not repeat (the conditions are the same: never
seen; declined rather than failing the batch)."""
REFUSALS_TABLE = "spans_refusals"
"""The Null table `naming_statement` inserts into: it stores nothing."""


@cache
def refusals() -> tuple[tuple[Declined, str], ...]:
    """The nine conditions the insert refuses a message for, in the order it checks them
    (a message is declined for the first its spans fail): each `Declined` with its SQL
    (true: the span is read)."""
    return (
        (START_PAST_RANGE, f"sp.start_time_unix_nano <= {MAX_TIME_NS}"),
        (EVENT_OUTSIDE, f"arrayAll(ev -> ev.time_unix_nano <= {MAX_TIME_NS} "
                        f"AND {_plain_attributes('ev.attributes')}, sp.events)"),
        (LINK_OUTSIDE, f"arrayAll(ln -> {_plain_attributes('ln.attributes')}, sp.links)"),
        (SPAN_ATTRIBUTES, _plain_attributes("sp.attributes")),
        (RESOURCE_ATTRIBUTES, _plain_attributes("rs.resource.attributes")),
        (SERVICE_NOT_TEXT, "arrayAll(kv -> kv.key != 'service.name' OR "
                           "kv.value.value = 'string_value', rs.resource.attributes)"),
        *((declined, f"NOT {condition}") for declined, condition in declines_sql()),
    )  # fmt: skip


def refusal_named(error: str) -> Declined | None:
    """The refusal the insert's `error` names (the first `REFUSAL_ERROR` in it); None for
    an error that is no refusal."""
    start = error.find(f"{REFUSAL_ERROR}: ")
    named = error[start + len(REFUSAL_ERROR) + 2 :] if start >= 0 else ""
    return next((d for d, _ in refusals() if named and named.startswith(d.reason)), None)


def may_be_sql_readable(value: bytes, traces: TracesData) -> bool:
    """False for a message the SQL certainly does not read (a span attribute key of a
    flattened message, which the Python decoder rebuilds: `genai_sql.FLATTENED`); the SQL
    itself refuses the rest of what it does not read (`refusals`). The bytes are searched
    first: a prefix found there may be text in a value (a fact naming a dropped key), so
    the keys decide."""
    if not any(prefix in value for prefix in _FLATTENED_PREFIXES):
        return True
    return not any(
        has_flattened_keys(kv.key for kv in span.attributes)
        for resource_spans in traces.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    )


def _plain_value(value: str) -> str:
    """SQL: the AnyValue tuple's text is spelled as Python spells it (a scalar, a plain
    decimal float, an array of scalars whose JSON needs no escaping)."""
    item_plain = (
        f"x.value IN ('bool_value', 'int_value', 'bytes_value', '') OR "
        f"(x.value = 'string_value' AND match(x.string_value, {quote(_JSON_PLAIN_RE)}))"
    )
    return (
        f"({value}.value IN ('string_value', 'bool_value', 'int_value', 'bytes_value', '') "
        f"OR ({value}.value = 'double_value' AND {_plain_float(f'{value}.double_value')}) "
        f"OR ({value}.value = 'array_value' AND arrayAll(x -> {item_plain}, "
        f"{value}.array_value.values)))"
    )


_JSON_PLAIN_RE = r"^[ !#-\[\]-~]*$"  # printable ASCII but the quote and the backslash


def _plain_float(number: str) -> str:
    return (
        f"(isFinite({number}) AND NOT ({number} = 0 AND 1 / {number} < 0) "
        f"AND abs({number}) < 1e15 "
        f"AND (abs({number}) >= 1e-4 OR {number} = floor({number})))"
    )


def _plain_attributes(key_values: str) -> str:
    """SQL: no repeated key, every value `_plain_value`."""
    return (
        f"(length(arrayDistinct(arrayMap(kv -> kv.key, {key_values}))) = length({key_values}) "
        f"AND arrayAll(kv -> {_plain_value('kv.value')}, {key_values}))"
    )


def _readable() -> str:
    """SQL: the span is inside what this SQL reads (every one of `refusals`)."""
    return " AND ".join(condition for _, condition in refusals())


def _refuse() -> str:
    """SQL: 0, or the insert's error (`REFUSAL_ERROR`) for a span outside what it reads:
    one `throwIf` over every condition (one per condition, `_named_refusals`, costs each
    insert ~20% more analysis: bench/refusal_check.py)."""
    return f"throwIf(NOT ({_readable()}), {quote(REFUSAL_ERROR)}) = 0"


def _named_refusals() -> str:
    """SQL: 0, or the error naming the first of `refusals` the span fails."""
    return " AND ".join(
        f"throwIf(NOT ({condition}), {quote(f'{REFUSAL_ERROR}: {declined.reason}')}) = 0"
        for declined, condition in refusals()
    )


# --- the SQL ------------------------------------------------------------------------------


def _value_text(value: str) -> str:
    """SQL: the stored text of an AnyValue tuple (span_rows.attribute_text)."""
    return (
        f"multiIf({value}.value = 'string_value', {value}.string_value, "
        f"{value}.value = 'bool_value', if({value}.bool_value, 'true', 'false'), "
        f"{value}.value = 'int_value', toString({value}.int_value), "
        f"{value}.value = 'double_value', {_float_text(f'{value}.double_value')}, "
        f"{value}.value = 'bytes_value', base64Encode({value}.bytes_value), "
        f"{value}.value = 'array_value', concat('[', arrayStringConcat(arrayMap(x -> "
        f"{_json_scalar('x')}, {value}.array_value.values), ','), ']'), 'null')"
    )


def _float_text(number: str) -> str:
    return (
        f"if({number} = floor({number}), concat(toString(toInt64({number})), '.0'), "
        f"toString({number}))"
    )


def _json_scalar(item: str) -> str:
    """SQL: JSON text of a scalar array item, as Python's json module writes it."""
    return (
        f"multiIf({item}.value = 'string_value', concat('\"', {item}.string_value, '\"'), "
        f"{item}.value = 'bool_value', if({item}.bool_value, 'true', 'false'), "
        f"{item}.value = 'int_value', toString({item}.int_value), "
        f"{item}.value = 'bytes_value', concat('\"', base64Encode({item}.bytes_value), '\"'), "
        f"'null')"
    )


def _is_content(key: str) -> str:
    """SQL: genai.is_content_key."""
    keys = ", ".join(quote(k) for k in sorted(g.CONTENT_KEYS))
    prefixes = ", ".join(quote(p) for p in g.MESSAGE_CONTENT_PREFIXES)
    return f"(has([{keys}], {key}) OR arrayExists(p -> startsWith({key}, p), [{prefixes}]))"


def _text_map(key_values: str, condition: str = "") -> str:
    """SQL: a Map of (key, text) of the KeyValue array, the pairs matching `condition`."""
    source = f"arrayFilter(kv -> {condition}, {key_values})" if condition else key_values
    return (
        f"CAST(mapFromArrays(arrayMap(kv -> kv.key, {source}), "
        f"arrayMap(kv -> {_value_text('kv.value')}, {source})) AS Map(String, String))"
    )


def _hex(column: str) -> str:
    return f"lower(hex({column}))"


def _enum_sql(field: str, names: tuple[str, ...]) -> str:
    """An OTLP enum's number in `field` as its name (`names` in enum order; a number
    outside the enum reads as the first, as the Python decoder reads it)."""
    cases = ", ".join(f"{field} = {n}, '{name}'" for n, name in enumerate(names) if n)
    return f"multiIf({cases}, '{names[0]}')"


_STATUS = _enum_sql("sp.status.code", STATUS_CODES)


def _columns_sql(genai: GenAISql) -> dict[str, str]:
    """SQL of every column of SPAN_COLUMNS over one ARRAY JOINed span `sp` (and the
    named steps of `genai`)."""
    content_event = "has([" + ", ".join(quote(e) for e in sorted(g.CONTENT_EVENTS)) + "], ev.name)"
    columns = {
        "Timestamp": "fromUnixTimestamp64Nano(toInt64(sp.start_time_unix_nano))",
        "TraceId": _hex("sp.trace_id"),
        "SpanId": _hex("sp.span_id"),
        "ParentSpanId": _hex("sp.parent_span_id"),
        "TraceState": "sp.trace_state",
        "SpanName": "sp.name",
        "SpanKind": _enum_sql("sp.kind", SPAN_KINDS),
        "ServiceName": "pg_resource[indexOf(pg_resource_keys, 'service.name')]",
        "ResourceAttributes": _text_map("rs.resource.attributes"),
        "ScopeName": "ss.scope.name",
        "ScopeVersion": "ss.scope.version",
        "SpanAttributes": _text_map("sp.attributes", f"NOT {_is_content('kv.key')}"),
        "ContentAttributes": _text_map("sp.attributes", _is_content("kv.key")),
        "Duration": "if(sp.end_time_unix_nano > sp.start_time_unix_nano, "
        "sp.end_time_unix_nano - sp.start_time_unix_nano, 0)",
        "StatusCode": "pg_status",
        "StatusMessage": "sp.status.message",
        "Events.Timestamp": "arrayMap(ev -> "
        "fromUnixTimestamp64Nano(toInt64(ev.time_unix_nano)), sp.events)",
        "Events.Name": "arrayMap(ev -> ev.name, sp.events)",
        "Events.Attributes": "arrayMap(ev -> if("
        + content_event
        + ", CAST(map() AS Map(String, String)), "
        + _text_map("ev.attributes", f"NOT {_is_content('kv.key')}")
        + "), sp.events)",
        "Links.TraceId": f"arrayMap(ln -> {_hex('ln.trace_id')}, sp.links)",
        "Links.SpanId": f"arrayMap(ln -> {_hex('ln.span_id')}, sp.links)",
        "Links.TraceState": "arrayMap(ln -> ln.trace_state, sp.links)",
        "Links.Attributes": f"arrayMap(ln -> {_text_map('ln.attributes')}, sp.links)",
        "Tenant": "pathgrade_tenant",
        **genai.columns,
        "ReceivedAt": "fromUnixTimestamp64Nano(toInt64(pathgrade_received_at))",
        "EventContentAttributes": "arrayMap(ev -> if("
        + content_event
        + ", "
        + _text_map("ev.attributes")
        + ", "
        + _text_map("ev.attributes", _is_content("kv.key"))
        + "), sp.events)",
    }  # fmt: skip
    missing = set(SPAN_COLUMNS) ^ set(columns)
    if missing:
        raise AssertionError(f"spans columns without SQL (or SQL without a column): {missing}")
    return columns


@cache
def span_rows_select(source: str) -> str:
    """`SELECT` of every `spans` column (each named as its column) over the spans ARRAY
    JOINed out of the framed values in `source` (a table or table function of
    `spans_value_structure()`'s columns), refusing (`REFUSAL_ERROR`) a span outside what it reads
    (`_over_spans`: the attributes the GenAI columns read, then the GenAI steps, each
    computed once)."""
    attributes = ArrayAttributeSql()
    genai = genai_sql(attributes, "sp.name", "pg_status")
    columns = _columns_sql(genai)
    named = {**attributes.definitions, "pg_status": _STATUS}
    for step in genai.steps:
        named.update(step)
    select = "SELECT\n  " + ",\n  ".join(f"{columns[c]} AS `{c}`" for c in SPAN_COLUMNS)
    return _over_spans(select, named, source, _refuse())


@cache
def input_table() -> str:
    """The Null table the store writer inserts framed values into; its materialized view
    (`input_table_ddl`) writes their spans' rows into `spans`. ClickHouse analyses a view's
    SELECT at less cost than the same SELECT in an INSERT: 0.10-0.14 s less per insert on
    chDB (docs/scale.md). Named by a hash of the view's SQL, so writers of two versions
    (a rolling upgrade) each insert through their own view, never both through one."""
    digest = hashlib.sha256((spans_value_structure() + span_rows_select("")).encode())
    return INPUT_TABLE_PREFIX + digest.hexdigest()[:12]


def input_table_ddl() -> list[str]:
    """The statements creating `input_table()` and its view (idempotent)."""
    table = input_table()
    return [
        f"CREATE TABLE IF NOT EXISTS {table} ({spans_value_structure()}) ENGINE = Null",
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {table}_mv TO spans AS\n"
        + span_rows_select(table),
    ]


def create_input_table(store: ClientStore) -> None:
    """Create `input_table()` and its view where they do not exist yet."""
    for statement in input_table_ddl():
        store.command(statement)


def create_refusals_table(store: ClientStore) -> None:
    """Create `REFUSALS_TABLE` where it does not exist yet."""
    store.command(f"CREATE TABLE IF NOT EXISTS {REFUSALS_TABLE} (pg_span UInt8) ENGINE = Null")


_SPAN_ARRAYS = dict(zip(ATTRIBUTE_ARRAYS, (
    "arrayMap(kv -> kv.key, sp.attributes)",
    "arrayMap(kv -> kv.value.value, sp.attributes)",
    "arrayMap(kv -> kv.value.string_value, sp.attributes)",
    "arrayMap(kv -> kv.value.int_value, sp.attributes)",
), strict=True)) | {
    "pg_resource_keys": "arrayMap(kv -> kv.key, rs.resource.attributes)",
    "pg_resource": "arrayMap(kv -> kv.value.string_value, rs.resource.attributes)",
}  # fmt: skip
"""The arrays of the span's (and its resource's) attributes the other values read."""


def _over_spans(select: str, named: dict[str, str], source: str, where: str) -> str:
    """SQL: `select` of the spans ARRAY JOINed out of the framed values of `source` that
    match `where`, in one query level: `_SPAN_ARRAYS` and the `named` values are WITH
    aliases, which ClickHouse computes once however often they are read (a subquery per
    step computes the same at about 0.3 s more analysis per statement)."""
    values = ",\n  ".join(f"{sql} AS {name}" for name, sql in {**_SPAN_ARRAYS, **named}.items())
    return (
        f"WITH\n  {values}\n{select}\nFROM {source}\n"
        "ARRAY JOIN resource_spans AS rs ARRAY JOIN rs.scope_spans AS ss "
        f"ARRAY JOIN ss.spans AS sp\nWHERE {where}"
    )


def refused_statement(source: str) -> str:
    """`SELECT` of the numbers of the framed values in `source` (a file: see `source_sql`)
    that hold a span outside what the insert reads, ascending, each with the index in
    `refusals` of the first its spans fail: the insert's refusal conditions without its
    columns, so its analysis is a fraction of the insert's."""
    numbered = f"(SELECT *, rowNumberInAllBlocks() AS pg_message FROM {source_sql(source)})"
    first = ", ".join(f"NOT ({sql}), {n}" for n, (_, sql) in enumerate(refusals()))
    select = f"SELECT pg_message, min(multiIf({first}, {len(refusals())}))"
    return (
        _over_spans(select, {}, numbered, f"NOT ({_readable()})")
        + "\nGROUP BY pg_message ORDER BY pg_message"
    )


def naming_statement(source: str) -> str:
    """The insert into `REFUSALS_TABLE` (it stores nothing) of a row per span of the framed
    values read from `source` ("input" or "file:PATH", as `insert_statement`), failing
    with the error naming the first of `refusals` a span fails (`refusal_named`)."""
    if source == "input":
        select = _over_spans(
            "SELECT 0", {}, f"input({quote(spans_value_structure())})", _named_refusals()
        )
        return f"INSERT INTO {REFUSALS_TABLE} {select}\nFORMAT Protobuf"
    select = _over_spans("SELECT 0", {}, source_sql(source), _named_refusals())
    return f"INSERT INTO {REFUSALS_TABLE} {select}"


def source_sql(source: str) -> str:
    """The table function reading the framed values of "file:PATH" (a local file, see
    ClientStore.insert_select)."""
    path = source.removeprefix("file:")
    return f"file({quote(path)}, 'Protobuf', {quote(spans_value_structure())})"


def insert_statement(source: str) -> str:
    """The insert of framed values read from `source` into `input_table()`: "input" (sent
    with the statement) or "file:PATH" (see `source_sql`)."""
    if source == "input":
        return f"INSERT INTO {input_table()} FORMAT Protobuf"
    return f"INSERT INTO {input_table()} SELECT * FROM {source_sql(source)}"
