"""QuietServer: uvicorn serving as usual, its housekeeping loop woken by `stop()` from
another thread rather than by a tick."""

from __future__ import annotations

import http.client
import socket
import threading
from typing import Any

import uvicorn
from pathgrade.transport.quiet_server import TICK_S, QuietServer


async def hello(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


def test_it_serves_with_a_date_header_and_stops_when_asked_from_another_thread() -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(hello, lifespan="off", log_config=None, access_log=False)
    server = QuietServer(config)
    ticks: list[int] = []
    on_tick = server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(counter)
        return await on_tick(counter)

    server.on_tick = counted  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)
            assert thread.is_alive()
        connection = http.client.HTTPConnection(*sock.getsockname())
        connection.request("GET", "/")
        answer = connection.getresponse()
        assert (answer.status, answer.read()) == (200, b"hello")
        assert answer.getheader("date")  # refreshed on every tick (`on_tick(0)`)
        connection.close()
    finally:
        server.stop()
        thread.join(timeout=30 * TICK_S)
        sock.close()
    assert not thread.is_alive()
    assert ticks and set(ticks) == {0}
