"""The store reached through the running stack's store owner: its loopback endpoint
(`pathgrade.stack.store_endpoint`), with the owner's token. Every query runs read-only there;
writes are the owner's typed inserts."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from pathgrade.batch_plane.store.errors import QueryError, RowsRejected
from pathgrade.schemas.store import QueryResult, RejectedRow

TOKEN_HEADER = "X-Pathgrade-Token"
"""The request header carrying the owner's token (`Authorization: Bearer` works too)."""


class RemoteStore:
    """A `Store` reached through the running stack's loopback endpoint with the owner's
    `token` (from its `stack.json`)."""

    def __init__(self, url: str, token: str, timeout_s: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def query(
        self,
        sql: str,
        parameters: dict[str, Any] | None = None,
        readonly: bool = True,
        tenant: str | None = None,
    ) -> QueryResult:
        """Every query through the endpoint runs read-only, whatever `readonly` says
        (writes are `insert`); of `tenant`'s rows only, when given."""
        body = {"sql": sql, "parameters": parameters}
        if tenant is not None:
            body["tenant"] = tenant
        payload = self._post("/sql", body)
        return QueryResult(payload["columns"], payload["types"], payload["rows"])

    def get(self, path: str) -> bytes:
        """The body of `GET path` (`/status`, `/metrics`); QueryError with the endpoint's
        reason when it refuses."""
        return self._send(urllib.request.Request(self.url + path))

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
        return json.loads(self._send(request))

    def _send(self, request: urllib.request.Request) -> bytes:
        """The answer's body to `request`, sent with the owner's token; the endpoint's
        refusal as a QueryError (RowsRejected for rows the store cannot encode)."""
        request.add_header(TOKEN_HEADER, self.token)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read())
            error = RowsRejected if answer.get("rows_rejected") else QueryError
            raise error(answer.get("error", str(exc))) from exc
        except urllib.error.URLError as exc:
            raise QueryError(
                f"the running stack did not answer at {self.url}: {exc.reason}"
            ) from exc
