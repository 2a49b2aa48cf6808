"""The base of pathgrade's own small HTTP endpoints (the store owner's loopback endpoint,
`/metrics`): quiet, whole-body answers."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing per request and answers one body at a time."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
