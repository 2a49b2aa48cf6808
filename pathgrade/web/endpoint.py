"""The store owner's loopback endpoint, and the client other commands use to reach it.

`POST /sql {"sql", "parameters"?, "readonly"?}` answers a query (read-only unless asked
otherwise by a pathgrade command); `POST /insert {"table", "columns", "rows"}` inserts
rows (422 with `rows_rejected` when the store cannot encode them: `RowsRejected`; with
`"skip_rejected": true` the others are stored and the rejected ones listed). It listens on
127.0.0.1 only: it is how commands share the one embedded store.
`GET /` and `GET /trace/<id>` are the read-only browser view (`pathgrade.web.ui`).

A web page the user visits cannot drive it: POSTs must be `application/json` (a
cross-site form cannot send that without a preflight this server never grants) and every
request must name a loopback host (a rebound DNS name is refused).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any

from pathgrade.batch_plane.store.client import (
    ClientStore,
    QueryError,
    QueryResult,
    RejectedRow,
    RowsRejected,
)
from pathgrade.web import ui
from pathgrade.web.http_handler import QuietHandler
from pathgrade.web.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class QueryServer(ThreadingHTTPServer):
    """Serves `/sql` and `/insert` over the owner's store on loopback."""

    daemon_threads = True

    def __init__(self, store: ClientStore, port: int = 0) -> None:
        self.store = store
        self.status: dict[str, Any] | None = None  # `pathgrade up`'s latest, for /status
        self.metrics_text = ""  # the same snapshot in Prometheus's text format, for /metrics
        super().__init__(("127.0.0.1", port), _StoreHandler)

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
        store = self.server.store
        try:
            if path == "/":
                latest = self.server.status
                status, page = HTTPStatus.OK, ui.overview_page(store, latest and latest["line"])
            elif path.startswith("/trace/") and ui.TRACE_ID.fullmatch(path[7:]):
                page = ui.trace_page(store, path[7:])
                status = HTTPStatus.OK if page else HTTPStatus.NOT_FOUND
                page = page or ui.message_page("not found", f"no stored span of trace {path[7:]}")
            else:
                status, page = HTTPStatus.NOT_FOUND, ui.message_page("not found", f"no page {path}")
        except QueryError as exc:
            status, page = (
                HTTPStatus.INTERNAL_SERVER_ERROR,
                ui.message_page("store error", str(exc)),
            )
        self._reply(status, page.encode(), "text/html; charset=utf-8")

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
        """Why this request is refused: a Host header that is not loopback."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        return None if host in _LOOPBACK_HOSTS else f"Host {host!r} is not loopback"

    def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
        self._reply(status, json.dumps(payload).encode(), "application/json")

    def _dispatch(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.path == "/sql":
            result = self.server.store.query(
                body["sql"], body.get("parameters"), readonly=body.get("readonly", True)
            )
            return result.__dict__
        if self.path == "/insert":
            store, rows = self.server.store, body["rows"]
            if body.get("skip_rejected"):
                rejected = store.insert_encodable(body["table"], rows, body["columns"])
                return {"inserted": len(rows) - len(rejected), "rejected": rejected}
            store.insert(body["table"], rows, body["columns"])
            return {"inserted": len(rows)}
        raise KeyError(f"no such endpoint {self.path}")


class RemoteStore:
    """A `Store` reached through the running stack's loopback endpoint."""

    def __init__(self, url: str, timeout_s: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def query(
        self, sql: str, parameters: dict[str, Any] | None = None, readonly: bool = False
    ) -> QueryResult:
        payload = self._post("/sql", {"sql": sql, "parameters": parameters, "readonly": readonly})
        return QueryResult(payload["columns"], payload["types"], payload["rows"])

    def insert(self, table: str, rows: list[list[Any]], column_names: list[str]) -> None:
        if rows:
            self._post("/insert", {"table": table, "columns": column_names, "rows": rows})

    def insert_encodable(
        self, table: str, rows: list[list[Any]], column_names: list[str]
    ) -> list[RejectedRow]:
        """`ClientStore.insert_encodable` in the store owner's process."""
        if not rows:
            return []
        answer = self._post(
            "/insert",
            {"table": table, "columns": column_names, "rows": rows, "skip_rejected": True},
        )
        return [(row, reason) for row, reason in answer["rejected"]]

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body, default=str).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read())
            error = RowsRejected if answer.get("rows_rejected") else QueryError
            raise error(answer.get("error", str(exc))) from exc
        except urllib.error.URLError as exc:
            raise QueryError(
                f"the running stack did not answer at {self.url}: {exc.reason}"
            ) from exc
