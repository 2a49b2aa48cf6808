"""Store integrity on a running `pathgrade up` (Tansu, chDB, the official OTLP exporter):
what a reader sends through `pathgrade sql` never stops the store writer, the alert sink
or the dataset commands, and the loopback endpoint takes no write but the owner's typed
ones. Counted: spans acknowledged vs stored, FINAL and not."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.batch_plane.store.remote import TOKEN_HEADER
from pathgrade.schemas.alerts import ALERT_COLUMNS

from pathgrade.demo.sender import DemoSummary, send_demo_traces
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.unit.realtime_plane.test_realtime_webhook import alert

pytestmark = pytest.mark.integration

APPENDED_BY_PATHGRADE = ("FORMAT Native", "SETTINGS readonly", "formatQuerySingleLine")
REFUSED = [
    "DROP TABLE spans",
    "CREATE TABLE made_by_a_reader (a Int8) ENGINE = Memory",
    "INSERT INTO alerts (AlertKey) VALUES ('forged')",
    "SELECT count() FROM spans SETTINGS readonly = 0",
    "SET readonly = 0",
    "USE system",
    "SYSTEM STOP MERGES",
    "OPTIMIZE TABLE spans FINAL",
    "SELECT throwIf(1)",
    "SELEC 1",
]
SLOW = "SELECT sleep(3)"


class Stack:
    def __init__(self, process: PathgradeProcess, data_dir: Path, http_port: int) -> None:
        self.process = process
        self.data_dir = data_dir
        self.url = f"http://127.0.0.1:{http_port}/v1/traces"

    @property
    def state(self) -> dict[str, Any]:
        return json.loads((self.data_dir / "stack.json").read_text())

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def post(self, path: str, body: Any, token: str | None = None) -> tuple[int, str]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers[TOKEN_HEADER] = token
        request = urllib.request.Request(
            self.state["query_url"] + path, data=json.dumps(body).encode(), headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())["error"]

    def counts(self) -> list[int]:
        """Spans not FINAL and FINAL, forged alerts, the tables, the mutations ever asked."""
        return self.process.sql(
            "SELECT (SELECT count() FROM spans), (SELECT count() FROM spans FINAL), "
            "(SELECT count() FROM alerts WHERE AlertKey = 'forged'), "
            "(SELECT count() FROM system.tables WHERE database = currentDatabase()), "
            "(SELECT count() FROM system.mutations)"
        ).rows[0]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("integrity")
    process, _, http_port = start_stack(data_dir, "--capture-tools", "*")
    yield Stack(process, data_dir, http_port)
    assert process.terminate() == 0, process.output


def stored(stack: Stack, summaries: list[DemoSummary]) -> tuple[int, int]:
    ids = ",".join(f"'{t}'" for s in summaries for t in s.trace_ids)
    return (
        stack.process.scalar(f"SELECT count() FROM spans WHERE TraceId IN ({ids})"),
        stack.process.scalar(f"SELECT count() FROM spans FINAL WHERE TraceId IN ({ids})"),
    )


def test_refused_reads_never_stop_the_writers(stack: Stack) -> None:
    """Every kind of refused statement, a failing one and a slow one run through
    `pathgrade sql` while spans flow; afterwards the store writer, the alert sink and a
    dataset command still write, and every acknowledged span is stored once."""
    sent: list[DemoSummary] = []
    exporter = OTLPSpanExporter(endpoint=stack.url)
    sender = threading.Thread(
        target=lambda: sent.append(send_demo_traces(exporter, traces=60, seed=31, rate_per_s=10))
    )
    sender.start()
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda sql: stack.cli("sql", sql), [*REFUSED, SLOW]))
    sender.join(timeout=120)
    *refused, slow = results
    assert slow.returncode == 0, slow.stderr
    for statement, result in zip(REFUSED, refused, strict=True):
        assert result.returncode == 1, (statement, result.stdout)
        assert result.stderr.startswith("pathgrade: store: "), result.stderr
        assert not any(text in result.stderr for text in APPENDED_BY_PATHGRADE), result.stderr

    sent.append(send_demo_traces(OTLPSpanExporter(endpoint=stack.url), traces=20, seed=32))
    created = stack.cli("dataset", "create", "integrity/after-refusals")
    assert created.returncode == 0 and "integrity/after-refusals@1" in created.stdout, created
    total = sum(summary.spans for summary in sent)
    wait_until(lambda: stored(stack, sent) == (total, total), timeout_s=120)
    ids = ",".join(f"'{t}'" for t in sent[1].trace_ids)
    alerted = f"SELECT count() FROM alerts FINAL WHERE TraceId IN ({ids})"
    wait_until(lambda: stack.process.scalar(alerted) > 0, timeout_s=60)
    listed = stack.cli("dataset", "list")
    assert "integrity/after-refusals  1" in listed.stdout, listed.stderr
    tables = {name for (name,) in stack.process.sql("SHOW TABLES").rows}
    assert {"spans", "alerts", "datasets"} <= tables and "made_by_a_reader" not in tables


def test_sql_errors_show_the_statement_and_clickhouses_reason(stack: Stack) -> None:
    failed = stack.cli("sql", "SELECT NoSuchColumn FROM spans")
    assert failed.returncode == 1
    assert "Unknown expression identifier `NoSuchColumn`" in failed.stderr
    assert "In scope SELECT NoSuchColumn FROM spans." in failed.stderr
    assert not any(text in failed.stderr for text in APPENDED_BY_PATHGRADE), failed.stderr


def test_the_endpoint_refuses_free_sql_writes_and_forged_inserts(stack: Stack) -> None:
    before = stack.counts()
    token = stack.state["token"]
    row = alert("PG112").model_copy(update={"alert_key": "forged"}).row()
    forged_alert = {"table": "alerts", "columns": list(ALERT_COLUMNS), "rows": [row]}
    answers = [
        stack.post("/sql", {"sql": "ALTER TABLE spans DELETE WHERE 1"}, token),
        stack.post("/sql", {"sql": "ALTER TABLE spans DELETE WHERE 1", "readonly": False}, token),
        stack.post("/sql", {"sql": "SELECT 1", "readonly": False}, token),
        stack.post("/insert", forged_alert),
        stack.post("/insert", {"table": "spans", "columns": ["TraceId"], "rows": [["t"]]}, token),
        stack.post("/insert", {"table": "alerts", "columns": ["Forged"], "rows": [[1]]}, token),
    ]
    assert [status for status, _ in answers] == [400, 400, 400, 403, 400, 400]
    assert "not ALTER" in answers[0][1]
    assert "unknown field 'readonly'" in answers[1][1] and "read-only" in answers[2][1]
    assert "needs the owner's token" in answers[3][1]
    assert "'spans' is not written through the endpoint" in answers[4][1]
    assert "alerts has no column 'Forged'" in answers[5][1]
    assert stack.counts() == before == [*before[:2], 0, *before[3:5]]  # no mutation asked
