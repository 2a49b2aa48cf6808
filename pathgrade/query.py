"""Read-only SQL against the store: directly, or through the running stack's loopback
query endpoint when the stack owns the embedded store."""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import json
import threading
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READONLY = {"readonly": 1}


class QueryError(RuntimeError):
    """The query failed; the message is ClickHouse's or the transport's."""


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[list[Any]]


def run_readonly(client: Any, sql: str, lock: threading.Lock | None = None) -> QueryResult:
    """Run `sql` with ClickHouse's readonly setting: writes and DDL are refused."""
    try:
        if lock is None:
            result = client.query(sql, settings=READONLY)
        else:
            with lock:
                result = client.query(sql, settings=READONLY)
    except Exception as exc:  # clickhouse-connect and chDB raise several types
        raise QueryError(str(exc).strip()) from exc
    return QueryResult(
        list(result.column_names),
        [t.name for t in result.column_types],
        [[_plain(v) for v in row] for row in result.result_rows],
    )


def _plain(value: Any) -> Any:
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
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class QueryServer(ThreadingHTTPServer):
    """`POST /sql` with `{"sql": ...}` on loopback, answered by the store's owner."""

    daemon_threads = True

    def __init__(self, client: Any, lock: threading.Lock, port: int = 0) -> None:
        self.client = client
        self.lock = lock
        super().__init__(("127.0.0.1", port), _QueryHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/sql"


class _QueryHandler(BaseHTTPRequestHandler):
    server: QueryServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            result = run_readonly(self.server.client, body["sql"], self.server.lock)
            status, payload = HTTPStatus.OK, result.__dict__
        except (ValueError, KeyError, TypeError) as exc:
            status, payload = HTTPStatus.BAD_REQUEST, {"error": f"bad request: {exc}"}
        except QueryError as exc:
            status, payload = HTTPStatus.BAD_REQUEST, {"error": str(exc)}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def query_remote(url: str, sql: str, timeout_s: float = 60.0) -> QueryResult:
    """Ask a running stack's query endpoint."""
    request = urllib.request.Request(
        url, data=json.dumps({"sql": sql}).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            payload = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise QueryError(json.loads(exc.read()).get("error", str(exc))) from exc
    except urllib.error.URLError as exc:
        raise QueryError(f"the running stack did not answer at {url}: {exc.reason}") from exc
    return QueryResult(payload["columns"], payload["types"], payload["rows"])


def format_table(result: QueryResult) -> str:
    """An aligned text table."""
    cells = [result.columns] + [[_cell(v) for v in row] for row in result.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(result.columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def format_json(result: QueryResult) -> str:
    """One JSON object a row, keyed by column."""
    return "\n".join(json.dumps(dict(zip(result.columns, row, strict=True))) for row in result.rows)
