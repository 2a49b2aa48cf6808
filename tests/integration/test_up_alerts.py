"""`pathgrade up` runs the realtime plane: demo failures reach the webhook and the
`alerts` table, which `pathgrade alerts` lists after the stack stopped."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from pathgrade.batch_plane.store.remote import RemoteStore

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.test_realtime import Webhook

pytestmark = pytest.mark.integration


def test_up_demo_alerts_on_webhook_and_in_table(tmp_path: Path) -> None:
    server = Webhook()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # --demo captures the demo tools' arguments by itself, so PG108/PG112 can decide.
    # --log-format json: the full alert document a line, as log shippers read it.
    stack, _, _ = start_stack(
        tmp_path, "--demo", "--no-demo-pages", "--alert-webhook", server.url, "--status-every", "1",
        "--log-format", "json",
    )  # fmt: skip
    try:
        wait_until(lambda: {a["code"] for a in server.alerts} >= {"PG108", "PG110"}, 90)
        assert not [a for a in server.alerts if a["kind"] == "cannot_decide"]
        check_browser_view(tmp_path, server.alerts[0]["trace_id"])
        check_status(tmp_path, stack)
        check_follow(tmp_path, {a["alert_key"] for a in server.alerts})
        if sys.platform.startswith("linux"):  # the store writer yields to the alert path
            nice = thread_nice_values(stack.process.pid)
            assert nice[stack.process.pid] == 0 and 19 in nice.values(), nice
    finally:
        assert stack.terminate() == 0, stack.output
        server.shutdown()
    for alert in server.alerts:
        assert alert["schema_version"] == 1 and len(alert["trace_id"]) == 32
    logged = {
        json.loads(line.split(" alert ", 1)[1])["alert_key"]
        for line in stack.output.splitlines()
        if " alert {" in line
    }
    assert {a["alert_key"] for a in server.alerts} <= logged  # the log line sink, flushed
    listed = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "alerts", "--data-dir", str(tmp_path),
         "--format", "json", "--limit", "1000"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    stored = {(row["TraceId"], row["Code"]) for row in map(json.loads, listed.stdout.splitlines())}
    assert {(a["trace_id"], a["code"]) for a in server.alerts} <= stored


def check_follow(data_dir: Path, already: set[str]) -> None:
    """`pathgrade alerts --follow` through the running stack prints alerts as they are
    stored, each once, and stops cleanly on Ctrl-C."""
    follower = PathgradeProcess(
        ["alerts", "--data-dir", str(data_dir), "--follow", "--since", "10m", "--format", "json"],
        ready_text='"Code": "PG',
    )
    wait_until(lambda: len(follower.lines) > len(already), 60)  # and new ones keep coming
    assert follower.interrupt() == 0, follower.output
    printed = [json.loads(line) for line in follower.lines]
    keys = [(a["TraceId"], a["Code"], a["SpanId"], a["Reason"]) for a in printed]
    assert len(keys) == len(set(keys))


def check_status(data_dir: Path, stack: PathgradeProcess) -> None:
    """The stack prints status lines while traffic moves, and `pathgrade status` reports
    every process's counters."""
    wait_until(lambda: any(line.startswith("status: in ") for line in stack.lines), 30)
    status = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "status", "--data-dir", str(data_dir),
         "--format", "json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    snapshot = json.loads(status.stdout)["snapshot"]
    assert snapshot["collector"]["accepted_spans"] > 0
    assert snapshot["store_writer"]["spans"] > 0
    assert [w["traces_evaluated"] > 0 for w in snapshot["realtime"]] == [True]
    assert snapshot["broker_rss_bytes"] > 0
    table = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "status", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert table.stdout.startswith("status: in ") and "realtime-1" in table.stdout
    state = json.loads((data_dir / "stack.json").read_text())
    owner = RemoteStore(state["query_url"], state["token"])
    assert "status: in " in fetch(state["ui_url"] + "/health")  # the browser UI shows it too
    metrics = owner.get("/metrics").decode()  # and Prometheus, in its text format
    assert "pathgrade_collector_accepted_spans_total" in metrics
    assert 'pathgrade_realtime_traces_evaluated_total{worker="1"}' in metrics
    assert 'pathgrade_realtime_detection_delay_p99_seconds{worker="1"}' in metrics
    assert ", p99 delay " in table.stdout


def check_browser_view(data_dir: Path, trace_id: str) -> None:
    """The browser UI the stack serves on loopback shows the alerts and their trace; a web
    page on another origin cannot reach the SQL endpoint, nor a rebound name the UI."""
    state = json.loads((data_dir / "stack.json").read_text())
    base, ui = state["query_url"], state["ui_url"]
    wait_until(lambda: trace_id[:12] in (page := fetch(ui + "/alerts")) and "PG110" in page)
    trace = fetch(f"{ui}/trace/{trace_id}")
    assert trace_id in trace and "execute_tool" in trace
    forged = urllib.request.Request(
        base + "/sql", data=b'{"sql": "SELECT 1"}', headers={"Content-Type": "text/plain"}
    )
    rebound = urllib.request.Request(ui + "/traces", headers={"Host": "attacker.example"})
    for request in (forged, rebound):
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError(f"{request.full_url} was not refused")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def thread_nice_values(pid: int) -> dict[int, int]:
    """Thread id -> nice value of every thread of `pid` (Linux /proc)."""
    values = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        values[int(task.name)] = int(fields[16])  # field 19 of stat: nice
    return values
