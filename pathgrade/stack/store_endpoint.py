"""The store owner's loopback endpoint (the client other commands reach it with is the
store room's `remote.RemoteStore`).

Every request needs the owner's token in TOKEN_HEADER (or as `Authorization: Bearer`): it
is made when the owner starts, kept in the owner's `stack.json`, readable by its user only,
and handed to the stack's own processes; without it, or with another, the answer is 403
and nothing is read or written. Any local account can connect to loopback; only the
owner's user can read the token.

`POST /sql {"sql", "parameters"?}` answers a query, always read-only: it runs on the
store's reader session, and only if it is a read that reaches nothing but the store's
tables (`batch_plane.store.reads`, `read_policy`); there is no way to ask for a write.
`"tenant"` in the body runs it on that tenant's reader session (only its rows). Writes are
the owner's typed operations only: `POST /insert {"table", "columns", "rows",
"skip_rejected"?}` inserts rows into one of WRITABLE_TABLES, naming columns that table has
(422 with `rows_rejected` when the store cannot encode them: `RowsRejected`; with
`"skip_rejected": true` the others are stored and the rejected ones listed). Any other
body is a 400 naming the field. `GET /status` and `GET /metrics` are the stack's latest
status (`pathgrade up --metrics-listen` serves the metrics without a token on an address
the user chose). It listens on 127.0.0.1 only: it is how commands share the one embedded
store. The browser UI (`pathgrade.web.app`) is served on its own loopback port (`ui_url`
in stack.json).

A web page the user visits cannot drive it: POSTs must be `application/json` (a
cross-site form cannot send that without a preflight this server never grants) and every
request must name a loopback host (a rebound DNS name is refused).
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any

from pathgrade.batch_plane.store import catalog
from pathgrade.batch_plane.store.client import ClientStore, QueryError, RowsRejected
from pathgrade.batch_plane.store.remote import TOKEN_HEADER
from pathgrade.stack.http_handler import QuietHandler
from pathgrade.stack.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
WRITABLE_TABLES = frozenset({
    "alerts", "webhook_cursors", "scores", "datasets", "dataset_items", "runs", "gates",
    "gate_rows", "judge_cache", "judge_calls", "judge_calibrations", "export_cursors",
    "monitor_rollups", "monitor_ticks",
})  # fmt: skip
"""What pathgrade's processes and commands write through the endpoint: alerts and the
webhook's delivery cursors, scores, dataset, run and gate records, the judge's cache and
calls, the results exporter's cursors, the monitors' rollups and evaluations. Spans and
log records come only from Kafka."""
_SQL_FIELDS = frozenset({"sql", "parameters", "tenant"})
_INSERT_FIELDS = frozenset({"table", "columns", "rows", "skip_rejected"})


class BadRequest(ValueError):
    """A request body the endpoint does not take (400, with the reason)."""


class QueryServer(ThreadingHTTPServer):
    """Serves `/sql` and `/insert` over the owner's store on loopback."""

    daemon_threads = True

    def __init__(self, store: ClientStore, port: int = 0) -> None:
        self.store = store
        self.status: dict[str, Any] | None = None  # `pathgrade up`'s latest, for /status
        self.metrics_text = ""  # the same snapshot in Prometheus's text format, for /metrics
        self.token = secrets.token_urlsafe(32)
        self._columns: dict[str, frozenset[str]] = {}  # of WRITABLE_TABLES, once asked
        self._columns_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _StoreHandler)

    def table_columns(self, table: str) -> frozenset[str]:
        """The columns of writable `table` in the store (asked once)."""
        with self._columns_lock:
            if table not in self._columns:
                self._columns[table] = catalog.columns_of(self.store, table)
            return self._columns[table]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _StoreHandler(QuietHandler):
    server: QueryServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        refusal = self._refusal()
        if refusal is None and self.headers.get_content_type() != "application/json":
            refusal = "Content-Type must be application/json"
        if refusal is not None:
            self._send(HTTPStatus.FORBIDDEN, {"error": refusal})
            return
        try:
            payload = self._dispatch(json.loads(body))
            status = HTTPStatus.OK
        except (ValueError, KeyError, TypeError) as exc:
            status, payload = HTTPStatus.BAD_REQUEST, {"error": f"bad request: {exc}"}
        except RowsRejected as exc:
            status = HTTPStatus.UNPROCESSABLE_ENTITY
            payload = {"error": str(exc), "rows_rejected": True}
        except QueryError as exc:
            status, payload = HTTPStatus.BAD_REQUEST, {"error": str(exc)}
        self._send(status, payload)

    def do_GET(self) -> None:
        refusal = self._refusal()
        if refusal is not None:
            self._send(HTTPStatus.FORBIDDEN, {"error": refusal})
            return
        path = self.path.split("?", 1)[0]
        if path == "/status":
            self._send_status()
            return
        if path == "/metrics":
            self._send_metrics()
            return
        self._send(
            HTTPStatus.NOT_FOUND,
            {
                "error": f"no endpoint GET {path} (the browser UI "
                "has its own address: ui_url in stack.json)"
            },
        )

    def _send_status(self) -> None:
        status = self.server.status
        if status is None:
            message = "no status yet: `pathgrade up` takes one every --status-every seconds"
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": message})
        else:
            self._send(HTTPStatus.OK, status)

    def _send_metrics(self) -> None:
        """The latest status snapshot in Prometheus's text format (none before the first)."""
        self._reply(HTTPStatus.OK, self.server.metrics_text.encode(), METRICS_CONTENT_TYPE)

    def _refusal(self) -> str | None:
        """Why this request is refused: a Host header that is not loopback, or no owner's
        token."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        if host not in _LOOPBACK_HOSTS:
            return f"Host {host!r} is not loopback"
        bearer = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        token = self.headers.get(TOKEN_HEADER) or bearer
        if not hmac.compare_digest(token.encode(), self.server.token.encode()):
            return (
                f"{self.path.split('?', 1)[0]} needs the owner's token ({TOKEN_HEADER}, "
                "in the data directory's stack.json, which only the owner's user can read)"
            )
        return None

    def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        self._reply(status, json.dumps(payload).encode(), "application/json")

    def _dispatch(self, body: Any) -> dict[str, Any]:
        if self.path == "/sql":
            _check_fields(body, _SQL_FIELDS, {"sql"})
            result = self.server.store.query(
                body["sql"], body.get("parameters"), readonly=True, tenant=body.get("tenant")
            )
            return result.__dict__
        if self.path == "/insert":
            return self._insert(body)
        raise KeyError(f"no such endpoint {self.path}")

    def _insert(self, body: Any) -> dict[str, Any]:
        """One typed write: rows of a writable table, in columns it has."""
        _check_fields(body, _INSERT_FIELDS, {"table", "columns", "rows"})
        table, columns, rows = body["table"], body["columns"], body["rows"]
        if table not in WRITABLE_TABLES:
            raise BadRequest(
                f"table: {table!r} is not written through the endpoint "
                f"(writable: {', '.join(sorted(WRITABLE_TABLES))})"
            )
        _check_columns(table, columns, self.server.table_columns(table))
        if not isinstance(rows, list) or not all(
            isinstance(row, list) and len(row) == len(columns) for row in rows
        ):
            raise BadRequest(f"rows: expected a list of rows of {len(columns)} values each")
        skip_rejected = body.get("skip_rejected", False)
        if not isinstance(skip_rejected, bool):
            raise BadRequest("skip_rejected: expected true or false")
        store = self.server.store
        if skip_rejected:
            rejected = store.insert_encodable(table, rows, columns)
            return {"inserted": len(rows) - len(rejected), "rejected": rejected}
        store.insert(table, rows, columns)
        return {"inserted": len(rows)}


def _check_fields(body: Any, allowed: frozenset[str], required: set[str]) -> None:
    """A JSON object with `required` fields and no field outside `allowed`."""
    if not isinstance(body, dict):
        raise BadRequest("expected a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise BadRequest(
            f"unknown field {unknown[0]!r} (fields: {', '.join(sorted(allowed))}); "
            "SQL through the endpoint is read-only, writes are /insert of known rows"
        )
    missing = sorted(required - set(body))
    if missing:
        raise BadRequest(f"missing field {missing[0]!r}")


def _check_columns(table: str, columns: Any, known: frozenset[str]) -> None:
    """`columns` are distinct names of columns `table` has."""
    if (
        not isinstance(columns, list)
        or not columns
        or not all(isinstance(c, str) for c in columns)
        or len(set(columns)) != len(columns)
    ):
        raise BadRequest("columns: expected a non-empty list of distinct column names")
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise BadRequest(f"columns: {table} has no column {unknown[0]!r}")
