"""`pathgrade up` runs the realtime plane: demo failures reach the webhook and the
`alerts` table, which `pathgrade alerts` lists after the stack stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.integration.conftest import start_stack, wait_until
from tests.integration.test_realtime import Webhook

pytestmark = pytest.mark.integration


def test_up_demo_alerts_on_webhook_and_in_table(tmp_path: Path) -> None:
    server = Webhook()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # --demo captures the demo tools' arguments by itself, so PG108/PG112 can decide.
    stack, _, _ = start_stack(tmp_path, "--demo", "--alert-webhook", server.url)
    try:
        wait_until(lambda: {a["code"] for a in server.alerts} >= {"PG108", "PG110"}, 90)
        assert not [a for a in server.alerts if a["kind"] == "cannot_decide"]
    finally:
        assert stack.terminate() == 0, stack.output
        server.shutdown()
    for alert in server.alerts:
        assert alert["schema_version"] == 1 and len(alert["trace_id"]) == 32
    listed = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "alerts", "--data-dir", str(tmp_path),
         "--format", "json", "--limit", "1000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    stored = {(row["TraceId"], row["Code"]) for row in map(json.loads, listed.stdout.splitlines())}
    assert {(a["trace_id"], a["code"]) for a in server.alerts} <= stored
