"""The one ClickHouse code path: clickhouse-connect to a server or to embedded chDB."""

from __future__ import annotations

import datetime
import decimal
import functools
import hashlib
import ipaddress
import json
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clickhouse_connect
from clickhouse_connect.driver import options as driver_options
from clickhouse_connect.driver._chdbclient import ChdbClient
from clickhouse_connect.driver.exceptions import DataError
from pathgrade.batch_plane.store.errors import (
    QueryError,
    RowsRejected,
    StatementRefused,
    StoreUnavailable,
    over_memory_limit,
)
from pathgrade.batch_plane.store.read_policy import (
    CATALOGUE_SQL,
    COMBINATORS_SQL,
    CatalogueEntry,
    FunctionCatalogue,
    ReadScope,
    policy_refusal,
)
from pathgrade.batch_plane.store.reads import PARSE_SQL, clickhouse_reason, parse_reason, refusal
from pathgrade.batch_plane.store.statement_tree import PARSE_TREE, references
from pathgrade.batch_plane.store.tenancy import tenant_settings
from pathgrade.schemas.store import QueryResult, RejectedRow

driver_options.pd = driver_options.pd_time_test = None
"""The store passes rows as lists and reads them as rows, never as DataFrames: without this,
clickhouse-connect imports pandas on the first insert only to ask whether the rows are a
DataFrame, 87 MB resident in the store owner (bench/memory.py, docs/scale.md's Memory)."""

MB = 1024 * 1024
CHECKED_READS = 1024
"""Statements whose check a store remembers (`ClientStore._checked_read`)."""
READER_SETTINGS = {"readonly": 1}
"""The reader session's settings, set when it opens: no statement run there can lift them."""
SESSION_SETTINGS = {
    "distributed_product_mode": "local",
    "insert_distributed_sync": 1,
    "do_not_merge_across_partitions_select_final": 1,
}
"""Every session's settings, set first.

`do_not_merge_across_partitions_select_final`: `FINAL` keeps the latest row of a key
within each partition, and lets a condition on time skip partitions. Without it ClickHouse
(26.9) applies no condition on a column outside the sorting key before `FINAL`, so
`spans FINAL WHERE Timestamp > ...` opened every day's partition (docs/scale.md, "FINAL
and partitions"). Every partitioned table here keeps a key's rows in one partition (the
partition key is a time the row's key fixes: a span's start, a minute, a bucket) except
`logs` (partitioned by arrival): its one read dedupes across partitions itself
(`trace_rows.LOG_SELECT`).

The other two have no effect on one server. On a sharded store
(`pathgrade migrate --shards`, `cluster_ddl`): a sub-query on a Distributed table
inside a query on one reads each shard's local table, right for the trace-keyed tables,
which keep a trace on one shard (a query relating alerts to traces says GLOBAL IN
instead); and an insert into a Distributed table returns once every shard holds its rows
(`distributed_foreground_insert`, named so older servers know it too), so the store
writer commits its Kafka offsets only for rows the shards have."""


def insert_halving(
    insert: Callable[[list[list[Any]]], None], rows: list[list[Any]]
) -> list[RejectedRow]:
    """Insert `rows` with `insert`, halving a batch the store rejects (RowsRejected) until
    the rows it cannot encode are found; returns those with the store's reason, so one bad
    row never holds up the others. A batch the store's memory limit refuses
    (`over_memory_limit`) is halved too, until the halves fit. Other errors propagate
    (halves already inserted are inserted again on a retry, which the idempotent tables
    absorb)."""
    try:
        insert(rows)
    except RowsRejected as exc:
        if len(rows) == 1:
            return [(rows[0], str(exc))]
    except QueryError as exc:
        if len(rows) == 1 or not over_memory_limit(exc):
            raise
    else:
        return []
    middle = len(rows) // 2
    return insert_halving(insert, rows[:middle]) + insert_halving(insert, rows[middle:])


class ClientStore:
    """A `Store` over two clickhouse-connect clients of one store (server or chDB).

    `client` writes (the store writer, the alert sink, dataset, run and gate records) and
    runs pathgrade's own queries; `reader`, a session of its own opened read-only
    (READER_SETTINGS), runs every query asked as `readonly` (anyone's SQL), once
    `reads.refusal` let it. Each session's settings and state are its own (chDB keeps
    them per connection handle, a server per session id), so nothing a reader runs,
    fails or waits on reaches the writer's session. `lock` serialises the writer's
    users, `reader_lock` the readers. With `open_reader`, a query of one tenant runs on a
    reader session of that tenant's own (`query`)."""

    def __init__(
        self,
        client: Any,
        reader: Any,
        lock: threading.Lock | None = None,
        open_reader: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        self.client = client
        self.reader = reader
        self.lock = lock or threading.Lock()
        self.reader_lock = threading.Lock()
        self._open_reader = open_reader  # a new session with these settings (tenant readers)
        self._tenant_readers: dict[str, tuple[Any, threading.Lock]] = {}
        self._readers_lock = threading.Lock()
        self._files: tempfile.TemporaryDirectory[str] | None = None  # `insert_select`'s
        self._inspection: _Inspection | None = None  # how statements are inspected, once known
        self._checked: OrderedDict[tuple[str, bool], str] = OrderedDict()  # `_checked_read`
        self._checked_lock = threading.Lock()

    def query(
        self,
        sql: str,
        parameters: dict[str, Any] | None = None,
        readonly: bool = False,
        tenant: str | None = None,
    ) -> QueryResult:
        """Rows of `sql`; with `readonly`, on the reader session and only if it is a read
        that reaches nothing but what a reader may (`reads.refusal`, `read_policy`); with
        `tenant`, read-only on a reader session of that tenant's own, opened with
        `tenancy.tenant_settings` before `readonly`: no query there sees another tenant's
        rows, and none can lift the filter."""
        if not readonly and tenant is None:
            return _run(self.client, self.lock, sql, parameters)
        reader, lock = self._reader_of(tenant)
        canonical = self._checked_read(sql, tenant, reader, lock)
        return _run(reader, lock, canonical, parameters)

    def _checked_read(self, sql: str, tenant: str | None, reader: Any, lock: threading.Lock) -> str:
        """The canonical form of `sql` once checked as a read for `tenant`'s session (the
        owner's with None); StatementRefused why not. The same statement text is checked
        once per kind of session (the last CHECKED_READS: the UI's queries repeat with
        other parameters), as the decision depends on the text only."""
        key = (sql, tenant is None)
        with self._checked_lock:
            if key in self._checked:
                self._checked.move_to_end(key)
                return self._checked[key]
        parsed = _run(reader, lock, PARSE_SQL, {"statement": sql}, parse_reason)
        canonical = parsed.rows[0][0]
        problem = refusal(canonical) or self._inspected_refusal(canonical, tenant, reader, lock)
        if problem is not None:
            raise StatementRefused(problem)
        with self._checked_lock:
            self._checked[key] = canonical
            if len(self._checked) > CHECKED_READS:
                self._checked.popitem(last=False)
        return canonical

    def _inspected_refusal(
        self, canonical: str, tenant: str | None, reader: Any, lock: threading.Lock
    ) -> str | None:
        """Why the read `canonical` reaches what this session may not (`read_policy`), from
        ClickHouse's syntax tree of it (written on the session `reader` that would run it);
        None when it may run. `EXISTS` names only; a `DESCRIBE` is checked as a query of
        what it describes; a `SHOW` the parser cannot write as a tree is the owner's only."""
        first = canonical.split(" ", 1)[0]
        if first == "EXISTS":
            return None
        if first == "SHOW" and tenant is not None:
            return (
                "SHOW is not a read this session runs (a tenant's session runs SELECT, "
                "WITH, DESCRIBE and EXISTS)"
            )
        statement = canonical
        if canonical.startswith(_DESCRIBE):
            statement = "SELECT * FROM " + canonical[len(_DESCRIBE) :]
        inspection = self._inspection_of()
        session = inspection.local or _Session(reader, lock)
        try:
            tree = json.loads(session.run(PARSE_TREE, {"statement": statement}).rows[0][0])
        except QueryError as exc:
            if first == "SHOW" and _NOT_SERIALISABLE in str(exc):
                return None  # SHOW PROCESSLIST, SHOW CREATE TABLE ...: names only
            return f"the statement could not be inspected: {exc}"
        main = _Session(self.reader, self.reader_lock)
        return policy_refusal(
            references(tree), ReadScope(tenant, inspection.database), inspection.catalogue,
            lambda: frozenset(name for (name,) in main.run(_TABLES_SQL).rows),
        )  # fmt: skip

    def _inspection_of(self) -> _Inspection:
        """How statements are inspected (found once): with the store's own parser and
        function catalogue, or, on a ClickHouse without `parseQueryToJSON` (before 26.x),
        with an embedded engine's (`local_engine`)."""
        if self._inspection is None:
            main = _Session(self.reader, self.reader_lock)
            local: _Session | None = None
            try:
                main.run(PARSE_TREE, {"statement": "SELECT 1"})
                catalogue = _catalogue(main)
            except QueryError:
                local = _Session(*local_engine())
                catalogue = _catalogue(local)
            database = main.run("SELECT currentDatabase()").rows[0][0]
            self._inspection = _Inspection(local, catalogue, database)
        return self._inspection

    def _reader_of(self, tenant: str | None) -> tuple[Any, threading.Lock]:
        """The reader session (and its lock) of `tenant`, opened the first time; the
        store's reader for every tenant."""
        if tenant is None:
            return self.reader, self.reader_lock
        with self._readers_lock:
            if tenant not in self._tenant_readers:
                if self._open_reader is None:
                    raise QueryError("this store opens no reader session of one tenant")
                settings = {**tenant_settings(tenant), **READER_SETTINGS}  # filter first
                self._tenant_readers[tenant] = (self._open_reader(settings), threading.Lock())
            return self._tenant_readers[tenant]

    def close(self) -> None:
        """Close every session (after the query each may be running)."""
        sessions = [(self.reader, self.reader_lock), *self._tenant_readers.values()]
        for client, lock in [*sessions, (self.client, self.lock)]:
            with lock:
                client.close()
        if self._files is not None:
            self._files.cleanup()

    def command(self, sql: str) -> None:
        """Run a statement that returns no rows (DDL) on the writer's session."""
        try:
            with self.lock:
                self.client.command(sql)
        except Exception as exc:  # clickhouse-connect and chDB raise several types
            raise QueryError(clickhouse_reason(str(exc))) from exc

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        """Insert `rows` on the writer's session. clickhouse-connect's insert context refers
        to itself (a bound method of its own), so only a full garbage collection frees it,
        and with it the rows it holds: it gets a list of its own, emptied once the insert is
        done, so the rows go when the caller drops them (docs/scale.md, Long run)."""
        if not rows:
            return
        held = list(rows)
        try:
            with self.lock:
                self.client.insert(table, held, column_names=column_names)
        except DataError as exc:
            raise RowsRejected(f"insert into {table} failed: {str(exc).strip()}") from exc
        except Exception as exc:
            raise QueryError(f"insert into {table} failed: {str(exc).strip()}") from exc
        finally:
            held.clear()

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]:
        """Insert the rows the store can encode (`insert_halving`); returns the others."""
        return insert_halving(lambda part: self.insert(table, part, column_names), rows)

    def insert_select(
        self,
        statement: Callable[[str], str],
        data: bytes,
        settings: dict[str, Any],
        format_schema: str,
    ) -> None:
        """Run `statement(source)`, an `INSERT` of `data` read from `source` in the
        statement's input format with the schema `format_schema` (a `.proto`'s text;
        `settings` name its message). A server gets the data with the statement (`source`
        "input": `INSERT ... FORMAT`) and the schema inline (`format_schema_source =
        'string'`, which it caches under its `format_schema_path`); embedded chDB, which
        takes no data with a statement, reads the data (`file(...)`) and the schema from
        files in a directory of this store's own. `statement` is given "input" or
        "file:PATH"."""
        try:
            with self.lock:
                if isinstance(self.client, ChdbClient):
                    self._over_files(statement, data, settings, format_schema, self.client.command)
                else:
                    inline = {**settings, "format_schema_source": "string",
                              "format_schema": format_schema}  # fmt: skip
                    self.client.command(statement("input"), data=data, settings=inline)
        except Exception as exc:
            raise QueryError(f"insert failed: {str(exc).strip()}") from exc

    def select_over(
        self,
        statement: Callable[[str], str],
        data: bytes,
        settings: dict[str, Any],
        format_schema: str,
    ) -> list[list[Any]] | None:
        """The rows of `statement("file:PATH")`, a `SELECT` reading `data` as
        `insert_select` does; None where the store reads such data only in an INSERT (a
        server: `input(...)` is for inserts)."""
        if not isinstance(self.client, ChdbClient):
            return None
        try:
            with self.lock:
                query = self._over_files(
                    statement, data, settings, format_schema, self.client.query
                )
        except Exception as exc:
            raise QueryError(f"query failed: {str(exc).strip()}") from exc
        return [list(row) for row in query.result_rows]

    def _over_files(
        self,
        statement: Callable[[str], str],
        data: bytes,
        settings: dict[str, Any],
        format_schema: str,
        run: Callable[..., Any],
    ) -> Any:
        """`run(statement("file:PATH"), settings=...)` with `data` and `format_schema` in
        files of this store's directory (chDB), the data's removed after."""
        directory = self._files_directory()
        schema = {**settings, "format_schema": content_named_file(directory, format_schema)}
        copy = Path(directory) / "values.data"  # one name: one statement text
        copy.write_bytes(data)
        try:
            return run(statement(f"file:{copy}"), settings=schema)
        finally:
            copy.unlink()

    def _files_directory(self) -> str:
        """A directory of this store's for the files an embedded insert reads (removed at
        `close`): one for the store's life, since chDB caches a schema per directory."""
        if self._files is None:
            self._files = tempfile.TemporaryDirectory(prefix="pathgrade-insert-")
        return self._files.name


_DESCRIBE = "DESCRIBE TABLE "
_NOT_SERIALISABLE = "does not support JSON serialization"
_TABLES_SQL = "SELECT name FROM system.tables WHERE database = currentDatabase()"


@dataclass(frozen=True)
class _Session:
    """A client and the lock its users take."""

    client: Any
    lock: threading.Lock

    def run(self, sql: str, parameters: dict[str, Any] | None = None) -> QueryResult:
        return _run(self.client, self.lock, sql, parameters)


@dataclass(frozen=True)
class _Inspection:
    """How a store inspects statements: on the session that runs them, or (`local`) on an
    embedded engine; with the function catalogue of that engine; in `database`."""

    local: _Session | None
    catalogue: FunctionCatalogue
    database: str


def _catalogue(session: _Session) -> FunctionCatalogue:
    """The function catalogue of `session`'s engine."""
    entries = [
        CatalogueEntry(name, bool(aggregate), bool(folded), alias_to, category)
        for name, aggregate, folded, alias_to, category in session.run(CATALOGUE_SQL).rows
    ]
    return FunctionCatalogue(entries, [name for (name,) in session.run(COMBINATORS_SQL).rows])


@functools.cache
def local_engine() -> tuple[Any, threading.Lock]:
    """An in-memory embedded engine of this process, to parse statements for a ClickHouse
    server too old to (in a process with no embedded store open: chDB opens one path)."""
    return clickhouse_connect.get_client(dsn="chdb://:memory:"), threading.Lock()


def content_named_file(directory: str, text: str) -> str:
    """The path of a file in `directory` holding `text`, named by its content (written
    once: chDB caches a schema file by name)."""
    path = Path(directory) / f"schema-{hashlib.sha256(text.encode()).hexdigest()[:16]}.proto"
    if not path.exists():
        path.write_text(text)
    return str(path)


def _run(
    client: Any,
    lock: threading.Lock,
    sql: str,
    parameters: dict[str, Any] | None,
    reason: Callable[[str], str] = clickhouse_reason,
) -> QueryResult:
    """One query on `client` under `lock`; a failure is a QueryError with `reason(message)`."""
    try:
        with lock:
            result = client.query(sql, parameters=parameters)
    except Exception as exc:  # clickhouse-connect and chDB raise several types
        raise QueryError(reason(str(exc))) from exc
    return QueryResult(
        list(result.column_names),
        [t.name for t in result.column_types],
        [[json_ready(v) for v in row] for row in result.result_rows],
    )


def json_ready(value: Any) -> Any:
    """A JSON-ready form of one ClickHouse value."""
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(
        value, decimal.Decimal | uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address
    ):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def embedded_dsn(data_dir: str) -> str:
    """The chDB DSN of the embedded store kept in `data_dir`."""
    return f"chdb://{data_dir}/clickhouse"


ENGINE_CACHES = ("mark_cache_size", "index_mark_cache_size", "primary_index_cache_size")
"""chDB's caches that grow with the store (5 GB each by default): the marks of the parts read,
of their skip indexes, and their primary keys."""


def engine_bounds(memory_mb: int, cache_mb: int) -> dict[str, int]:
    """The embedded engine's options bounding its memory: `memory_mb` for everything it
    tracks (inserts, merges, queries and caches; a statement that would go over fails with
    ClickHouse's MEMORY_LIMIT_EXCEEDED, the engine and its process go on) and `cache_mb`
    for each of ENGINE_CACHES."""
    return {"max_server_memory_usage": memory_mb * MB} | {
        cache: cache_mb * MB for cache in ENGINE_CACHES
    }


def open_client_store(dsn: str, engine: dict[str, int] | None = None) -> ClientStore:
    """A `ClientStore` on `dsn`: a writer session and a read-only reader session (and
    one per tenant that asks); `engine` (`engine_bounds`) the embedded engine's options,
    which its first session starts it with (ignored for a ClickHouse server)."""
    client = connect(dsn, engine=engine)
    try:
        return ClientStore(
            client,
            connect(dsn, READER_SETTINGS, engine),
            open_reader=lambda s: connect(dsn, s, engine),
        )
    except BaseException:
        client.close()
        raise


def connect(
    dsn: str, settings: dict[str, Any] | None = None, engine: dict[str, int] | None = None
) -> Any:
    """A clickhouse-connect client for `dsn` (`chdb:///path`, `http(s)://...` or
    `clickhouse://user:password@host:port/database`), its session opened with
    SESSION_SETTINGS and `settings`; on chDB, the engine with the options `engine`."""
    embedded = {"chdb_options": engine} if engine and dsn.startswith("chdb:") else {}
    try:
        client = clickhouse_connect.get_client(
            dsn=dsn, settings={**SESSION_SETTINGS, **(settings or {})}, **embedded
        )
        client.query("SELECT 1")
    except Exception as exc:  # the driver raises several unrelated types
        raise StoreUnavailable(f"cannot reach ClickHouse at {redact_dsn(dsn)}: {exc}") from exc
    return client


def redact_dsn(dsn: str) -> str:
    """`dsn` with any password replaced, fit for an error message."""
    scheme, sep, rest = dsn.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return dsn
    user = credentials.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}"
