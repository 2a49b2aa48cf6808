"""Serving the browser UI with uvicorn: in a thread of the store owner (`pathgrade up`) or
in the foreground (`pathgrade ui`, the production box). The app (its pages, templates and
queries: about a CPU-second of imports) is built on the first request, so a stack nobody
browses never loads it."""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

import uvicorn

from pathgrade.transport.quiet_server import QuietServer
from pathgrade.web.rendering import UiSettings

START_TIMEOUT_S = 30.0


class AppOnFirstRequest:
    """An ASGI app that builds the UI's app (`pathgrade.web.app.create_app`) on its first
    request and hands every request to it."""

    def __init__(self, settings: UiSettings) -> None:
        self.settings = settings
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:  # built without an await: requests on the loop cannot overlap
            from pathgrade.web.app import create_app

            self._app = create_app(self.settings)
        await self._app(scope, receive, send)


class UiServer:
    """The UI on `host:port` (0: any free port) until `stop()`."""

    def __init__(self, settings: UiSettings, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.socket = socket.create_server((host, port))  # bound now: the port is known
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            AppOnFirstRequest(settings), log_level="warning", access_log=False, lifespan="off"
        )
        self.server = QuietServer(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Serve in a daemon thread; returns once it accepts requests."""
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, name="ui", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the browser UI did not start on {self.url}")
            time.sleep(0.02)

    def serve_forever(self) -> None:
        """Serve in this thread until SIGINT or SIGTERM."""
        self.server.run(sockets=[self.socket])

    def stop(self) -> None:
        self.server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()


logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
