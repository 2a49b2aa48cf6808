"""The loopback endpoint and the `/metrics` exporter on uvicorn: a connection holds no
thread, a query being run holds no other request, a browser's forged request and a
rebound name are refused, a head past its bounds is answered and the connection closed,
and a store that fails gets an answer naming the failure."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pathgrade.batch_plane.store.remote import TOKEN_HEADER
from pathgrade.schemas.store import QueryResult

from pathgrade.stack.metrics import MetricsServer
from pathgrade.stack.store_endpoint import QueryServer


class HeldStore:
    """A store whose queries wait for `release` when their SQL says "hold", and fail
    when it says "fail"."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.held = threading.Event()

    def query(self, sql: str, *args: Any, **kwargs: Any) -> QueryResult:
        if sql == "fail":
            raise RuntimeError("the store broke")
        if sql == "hold":
            self.held.set()
            assert self.release.wait(30)
        return QueryResult(["answer"], ["String"], [[sql]])


@pytest.fixture
def store() -> HeldStore:
    return HeldStore()


@pytest.fixture
def server(store: HeldStore) -> Iterator[QueryServer]:
    server = QueryServer(store)  # type: ignore[arg-type]
    server.start("query-test")
    yield server
    store.release.set()
    server.shutdown()
    server.server_close()


def request(
    server: QueryServer, method: str, path: str, body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """One request with the owner's token and a JSON body, unless `headers` say otherwise."""
    connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    sent = {TOKEN_HEADER: server.token, "Content-Type": "application/json", **(headers or {})}
    data = None if body is None else json.dumps(body).encode()
    try:
        connection.request(method, path, data, sent)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_query_being_run_holds_no_other_request(server: QueryServer, store: HeldStore) -> None:
    held: list[tuple[int, dict[str, Any]]] = []
    slow = threading.Thread(
        target=lambda: held.append(request(server, "POST", "/sql", {"sql": "hold"}))
    )
    slow.start()
    assert store.held.wait(30)
    assert request(server, "POST", "/sql", {"sql": "quick"}) == (
        200, {"columns": ["answer"], "types": ["String"], "rows": [["quick"]]},
    )  # fmt: skip
    server.status = {"line": "status: fine"}
    assert request(server, "GET", "/status") == (200, {"line": "status: fine"})
    store.release.set()
    slow.join(30)
    assert held == [(200, {"columns": ["answer"], "types": ["String"], "rows": [["hold"]]})]


def test_idle_connections_hold_no_thread(server: QueryServer) -> None:
    threads = threading.active_count()
    idle = [socket.create_connection(server.server_address[:2]) for _ in range(40)]
    try:
        assert request(server, "POST", "/sql", {"sql": "through"})[0] == 200
        assert threading.active_count() <= threads + 1  # at most the pool's first worker
    finally:
        for connection in idle:
            connection.close()


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"Host": "attacker.example:8080"}, "Host 'attacker.example' is not loopback"),
        ({"Content-Type": "text/plain"}, "Content-Type must be application/json"),
        (
            {"Content-Type": "application/x-www-form-urlencoded"},
            "Content-Type must be application/json",
        ),
    ],
)
def test_what_a_web_page_could_send_is_refused(
    server: QueryServer, headers: dict[str, str], reason: str
) -> None:
    status, answer = request(server, "POST", "/sql", {"sql": "forged"}, headers)
    assert (status, answer) == (403, {"error": reason})


def test_every_refusal_and_failure_is_a_json_answer_naming_it(server: QueryServer) -> None:
    assert request(server, "PUT", "/sql", {"sql": "x"}) == (
        501, {"error": "Unsupported method ('PUT')"},
    )  # fmt: skip
    assert request(server, "POST", "/sql", {"sql": "fail"}) == (
        500, {"error": "internal error: RuntimeError: the store broke"},
    )  # fmt: skip
    status, answer = request(server, "POST", "/nowhere", {"sql": "x"})
    assert status == 400 and "no such endpoint /nowhere" in answer["error"]
    status, answer = request(server, "GET", "/status")
    assert status == 503 and "no status yet" in answer["error"]


def test_a_head_past_its_bounds_is_answered_and_the_connection_closed(
    server: QueryServer,
) -> None:
    with socket.create_connection(server.server_address[:2], timeout=30) as connection:
        headers = "".join(f"X-Filler-{i}: x\r\n" for i in range(101))
        connection.sendall(f"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 ")
    assert b"Too many headers (more than 100)" in answer


def test_metrics_answer_get_only_and_a_failed_collection_is_a_500() -> None:
    collected = iter(["pathgrade_x_total 2\n"])
    server = MetricsServer("127.0.0.1", 0, lambda: next(collected))
    server.start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        answers = []
        for method in ("POST", "GET", "GET"):  # one connection: kept alive between scrapes
            connection.request(method, "/metrics")
            response = connection.getresponse()
            answers.append((response.status, response.read()))
        connection.close()
    finally:
        server.stop()
    assert answers == [
        (501, b"Unsupported method ('POST')\n"),
        (200, b"pathgrade_x_total 2\n"),
        (500, b"collecting metrics failed; see the log\n"),
    ]
