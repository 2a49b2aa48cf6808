"""`pathgrade up` runs the realtime plane: demo failures reach the webhook and the
`alerts` table, which `pathgrade alerts` lists after the stack stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import start_stack, wait_until

pytestmark = pytest.mark.integration


class _Receiver(BaseHTTPRequestHandler):
    received: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_up_demo_alerts_on_webhook_and_in_table(tmp_path: Path) -> None:
    handler = type("Handler", (_Receiver,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    webhook = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    # --demo captures the demo tools' arguments by itself, so PG108/PG112 can decide.
    stack, _, _ = start_stack(tmp_path, "--demo", "--alert-webhook", webhook)
    try:
        wait_until(lambda: {a["code"] for a in handler.received} >= {"PG108", "PG110"}, 90)
        assert not [a for a in handler.received if a["kind"] == "cannot_decide"]
    finally:
        assert stack.terminate() == 0, stack.output
        server.shutdown()
    for alert in handler.received:
        assert alert["schema_version"] == 1 and len(alert["trace_id"]) == 32
    listed = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "alerts", "--data-dir", str(tmp_path),
         "--format", "json", "--limit", "1000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    stored = {(row["TraceId"], row["Code"]) for row in map(json.loads, listed.stdout.splitlines())}
    assert {(a["trace_id"], a["code"]) for a in handler.received} <= stored
