"""The loopback endpoint answers the owner's token only, runs free SQL read-only, always,
and writes only the owner's typed operations: rows of a writable table in columns it has.
Forged requests are raw HTTP, as any local process would send them."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from pathgrade.batch_plane.store.client import ClientStore, QueryError
from pathgrade.batch_plane.store.remote import TOKEN_HEADER, RemoteStore
from pathgrade.schemas.alerts import ALERT_COLUMNS

from pathgrade.stack.store_endpoint import QueryServer
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.unit.realtime_plane.test_realtime_webhook import alert


@pytest.fixture(scope="module")
def server(store: ClientStore) -> Iterator[QueryServer]:
    server = QueryServer(store)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def post(server: QueryServer, path: str, body: Any, token: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers[TOKEN_HEADER] = token
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def counts(store: ClientStore) -> tuple[int, ...]:
    return tuple(
        store.query(
            "SELECT (SELECT count() FROM spans), (SELECT count() FROM spans FINAL), "
            "(SELECT count() FROM alerts), (SELECT count() FROM alerts FINAL), "
            "(SELECT count() FROM system.tables WHERE database = currentDatabase())"
        ).rows[0]
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"sql": "ALTER TABLE spans DELETE WHERE 1"}, "only read statements run here"),
        (
            {"sql": "ALTER TABLE spans DELETE WHERE 1", "readonly": False},
            "unknown field 'readonly'",
        ),
        ({"sql": "SELECT 1", "readonly": False}, "unknown field 'readonly'"),
        ({"sql": "DROP TABLE alerts", "parameters": {}}, "only read statements"),
        ({"sql": "INSERT INTO alerts (AlertKey) VALUES ('forged')"}, "only read statements"),
        ({"sql": "SELECT 1 INTO OUTFILE '/tmp/pathgrade-forged'"}, "INTO OUTFILE"),
        ({"query": "SELECT 1"}, "unknown field 'query'"),
        (["SELECT 1"], "expected a JSON object"),
    ],
)
def test_free_sql_is_read_only_whatever_the_body_says(
    store: ClientStore, server: QueryServer, body: Any, reason: str
) -> None:
    before = counts(store)
    status, answer = post(server, "/sql", body, token=server.token)
    assert status == 400 and reason in answer["error"]
    assert counts(store) == before


@pytest.mark.parametrize(
    ("body", "token", "status", "reason"),
    [
        ("alert", None, 403, "/insert needs the owner's token"),
        ("alert", "guessed", 403, "/insert needs the owner's token"),
        ({"table": "spans", "columns": ["TraceId"], "rows": [["t"]]}, "owner", 400,
         "'spans' is not written through the endpoint"),
        ({"table": "system.query_log", "columns": ["query"], "rows": [["q"]]}, "owner", 400,
         "is not written through the endpoint"),
        ({"table": "alerts", "columns": ["AlertKey", "Forged"], "rows": [["k", 1]]}, "owner",
         400, "alerts has no column 'Forged'"),
        ({"table": "alerts", "columns": ["AlertKey", "AlertKey"], "rows": [["k", "k"]]},
         "owner", 400, "distinct column names"),
        ({"table": "alerts", "columns": ["AlertKey"], "rows": [["k", "extra"]]}, "owner", 400,
         "rows of 1 values each"),
        ({"table": "alerts", "columns": ["AlertKey"], "rows": [["k"]], "sql": "DROP TABLE x"},
         "owner", 400, "unknown field 'sql'"),
        ({"table": "alerts", "columns": ["AlertKey"], "rows": [["k"]], "skip_rejected": "yes"},
         "owner", 400, "skip_rejected: expected true or false"),
    ],
)  # fmt: skip
def test_inserts_are_typed_operations_of_the_owner(
    store: ClientStore, server: QueryServer, body: Any, token: str | None, status: int,
    reason: str,
) -> None:  # fmt: skip
    if body == "alert":
        body = {"table": "alerts", "columns": list(ALERT_COLUMNS), "rows": [alert().row()]}
    before = counts(store)
    answered, answer = post(server, "/insert", body, server.token if token == "owner" else token)
    assert (answered, reason in answer["error"]) == (status, True)
    assert counts(store) == before


def test_the_owners_processes_and_commands_write_with_its_token(
    store: ClientStore, server: QueryServer
) -> None:
    written = alert("PG101").model_copy(update={"alert_key": "through-the-endpoint"})
    owner = RemoteStore(server.url, server.token)
    owner.insert("alerts", [written.row()], list(ALERT_COLUMNS))
    keys = store.query("SELECT AlertKey FROM alerts FINAL", readonly=True).rows
    assert ["through-the-endpoint"] in keys
    with pytest.raises(QueryError, match="needs the owner's token"):
        RemoteStore(server.url, "guessed").insert("alerts", [written.row()], list(ALERT_COLUMNS))
    answered = owner.query("SELECT count() FROM alerts FINAL", readonly=False)
    assert answered.rows == [[len(keys)]]  # reads whatever asked


def get(server: QueryServer, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_every_door_needs_the_owners_token(store: ClientStore, server: QueryServer) -> None:
    """A local process without the token reads nothing: no rows, no status, no metrics."""
    store.insert("alerts", [["door-secret", "globex"]], ["AlertKey", "Tenant"])
    server.status = {"snapshot": {"taken_at": 1.0}, "line": "status: in 7 spans"}
    server.metrics_text = "pathgrade_collector_accepted_spans_total 7\n"
    reads = [("/sql", {"sql": "SELECT AlertKey FROM alerts"}),
             ("/sql", {"sql": "SELECT AlertKey FROM alerts", "tenant": "globex"})]  # fmt: skip
    for token in (None, "", "guessed", server.token[:-1], server.token + "x"):
        for path, body in reads:
            status, answer = post(server, path, body, token)
            assert status == 403 and "needs the owner's token" in answer["error"]
            assert "door-secret" not in json.dumps(answer)
        for path in ("/status", "/metrics"):
            headers = {} if token is None else {TOKEN_HEADER: token}
            status, body = get(server, path, headers)
            assert status == 403 and b"7" not in body
    assert post(server, "/sql", reads[1][1], server.token)[1]["rows"] == [["door-secret"]]
    for headers in ({TOKEN_HEADER: server.token}, {"Authorization": f"Bearer {server.token}"}):
        assert get(server, "/status", headers) == (200, json.dumps(server.status).encode())
        assert get(server, "/metrics", headers) == (200, server.metrics_text.encode())
