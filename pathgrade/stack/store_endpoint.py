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

It is served by uvicorn on the OTLP/HTTP receiver's connections (`collector.http_server`:
idle, head and connection bounds, LIMITS here); a POST's body is read on the event loop
(whole within BODY_TIMEOUT_S) and only then does a worker thread (of DEFAULT_WORKERS) run
the store's work, so a connection costs no thread.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from pathgrade.batch_plane.store import catalog
from pathgrade.batch_plane.store.client import ClientStore, QueryError, RowsRejected
from pathgrade.batch_plane.store.remote import TOKEN_HEADER
from pathgrade.collector.http_server import EXCHANGE, ConnectionLimits, UvicornServer
from pathgrade.collector.limits import DEFAULT_WORKERS
from pathgrade.stack.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

log = logging.getLogger(__name__)

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
LIMITS = ConnectionLimits(idle_timeout_s=60.0, read_timeout_s=10.0, max_connections=1024)
"""The endpoint's connections: closed after 60 s without a request, a request head whole
within 10 s, at most 1,024 open (the longest-idle one closed to admit another)."""
BODY_TIMEOUT_S = 60.0
"""A POST's body must be whole this long after its head (408 otherwise)."""
GRACE_S = 10.0
"""At shutdown, requests being answered finish within this."""


class BadRequest(ValueError):
    """A request body the endpoint does not take (400, with the reason)."""


class QueryServer(UvicornServer):
    """Serves `/sql` and `/insert` over the owner's store on loopback (`serve_forever()`
    in one thread, `shutdown()` from another, then `server_close()`)."""

    def __init__(self, store: ClientStore, port: int = 0) -> None:
        self.store = store
        self.status: dict[str, Any] | None = None  # `pathgrade up`'s latest, for /status
        self.metrics_text = ""  # the same snapshot in Prometheus's text format, for /metrics
        self.token = secrets.token_urlsafe(32)
        self._columns: dict[str, frozenset[str]] = {}  # of WRITABLE_TABLES, once asked
        self._columns_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(DEFAULT_WORKERS, thread_name_prefix="store-endpoint")
        super().__init__(("127.0.0.1", port), _StoreApp(self, self._pool), LIMITS, GRACE_S)

    def table_columns(self, table: str) -> frozenset[str]:
        """The columns of writable `table` in the store (asked once)."""
        with self._columns_lock:
            if table not in self._columns:
                self._columns[table] = catalog.columns_of(self.store, table)
            return self._columns[table]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False)


class _StoreApp:
    """The ASGI application: checks the host and the token, reads a POST's body on the
    event loop, runs the store's work in a worker thread, answers in JSON."""

    def __init__(self, server: QueryServer, pool: ThreadPoolExecutor) -> None:
        self.server = server
        self.pool = pool

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        try:
            answer = await self._answer(request)
        except ClientDisconnect:
            return
        except Exception as exc:  # a bug must still get an answer, and the log its trace
            log.exception("store endpoint: %s %s failed", request.method, request.url.path)
            message = f"internal error: {type(exc).__name__}: {exc}"
            answer = _json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": message})
        await answer(scope, receive, send)

    async def _answer(self, request: Request) -> Response:
        """The answer to one request (a refusal says why)."""
        method, path = request.method, request.url.path
        if method not in ("GET", "POST"):
            message = f"Unsupported method ({method!r})"
            return _json(HTTPStatus.NOT_IMPLEMENTED, {"error": message})
        refusal = self._refusal(request)
        if refusal is None and method == "POST" and _content_type(request) != "application/json":
            refusal = "Content-Type must be application/json"
        if refusal is not None:
            return _json(HTTPStatus.FORBIDDEN, {"error": refusal})
        if method == "GET":
            return self._get(path)
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                body = await request.body()
        except TimeoutError:
            message = f"body not completed within {BODY_TIMEOUT_S:g} s of the request head"
            return _json(HTTPStatus.REQUEST_TIMEOUT, {"error": message})
        request.scope["extensions"][EXCHANGE].processing()
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._post, path, body)

    def _get(self, path: str) -> Response:
        """`/status` and `/metrics`: the latest snapshot."""
        if path == "/status":
            status = self.server.status
            if status is None:
                message = "no status yet: `pathgrade up` takes one every --status-every seconds"
                return _json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": message})
            return _json(HTTPStatus.OK, status)
        if path == "/metrics":
            return Response(self.server.metrics_text.encode(), media_type=METRICS_CONTENT_TYPE)
        message = (
            f"no endpoint GET {path} (the browser UI has its own address: ui_url in stack.json)"
        )
        return _json(HTTPStatus.NOT_FOUND, {"error": message})

    def _post(self, path: str, body: bytes) -> Response:
        """Worker: the answer to a POST read whole."""
        try:
            return _json(HTTPStatus.OK, self._dispatch(path, json.loads(body)))
        except (ValueError, KeyError, TypeError) as exc:
            return _json(HTTPStatus.BAD_REQUEST, {"error": f"bad request: {exc}"})
        except RowsRejected as exc:
            payload = {"error": str(exc), "rows_rejected": True}
            return _json(HTTPStatus.UNPROCESSABLE_ENTITY, payload)
        except QueryError as exc:
            return _json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})

    def _refusal(self, request: Request) -> str | None:
        """Why this request is refused: a Host header that is not loopback, or no owner's
        token."""
        headers = request.headers
        host = headers.get("host", "").rsplit(":", 1)[0].strip("[]")
        if host not in _LOOPBACK_HOSTS:
            return f"Host {host!r} is not loopback"
        bearer = headers.get("authorization", "").removeprefix("Bearer ").strip()
        token = headers.get(TOKEN_HEADER) or bearer
        if not hmac.compare_digest(token.encode(), self.server.token.encode()):
            return (
                f"{request.url.path} needs the owner's token ({TOKEN_HEADER}, "
                "in the data directory's stack.json, which only the owner's user can read)"
            )
        return None

    def _dispatch(self, path: str, body: Any) -> dict[str, Any]:
        if path == "/sql":
            _check_fields(body, _SQL_FIELDS, {"sql"})
            result = self.server.store.query(
                body["sql"], body.get("parameters"), readonly=True, tenant=body.get("tenant")
            )
            return result.__dict__
        if path == "/insert":
            return self._insert(body)
        raise KeyError(f"no such endpoint {path}")

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


def _json(status: HTTPStatus, payload: dict[str, Any]) -> Response:
    """`payload` as a JSON answer of `status`."""
    return Response(json.dumps(payload).encode(), status, media_type="application/json")


def _content_type(request: Request) -> str:
    """The request's media type, lower-case, without parameters."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


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
