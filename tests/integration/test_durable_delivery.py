"""Crash durability and at-least-once alert delivery of `pathgrade up`, lean, on one stack
(real broker, real chDB, the official OTLP/HTTP exporter):

- the webhook gets every alert of the `alerts` table after its queue overflowed, the
  receiver was down and the realtime process was SIGKILLed and restarted (repeats
  allowed, counted, with the same alert key);
- SIGKILL of `pathgrade up` while spans it acknowledged are held only by the bundled
  memory-only broker and the collector's log, then `pathgrade up` on the same directory:
  every acknowledged span is stored (FINAL and not), and the log lets them go.

(Under a steady load with every fault: test_faults.)
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port
from pathgrade.stack.ownership import process_started
from tests.integration.conftest import PathgradeProcess, spill_on_disk, wait_until
from tests.support.steady_load import ScriptedReceiver

pytestmark = pytest.mark.integration

QUEUE_SIZE = 5  # alerts the realtime process keeps in memory for the webhook


@dataclass
class Stack:
    """The module's stack: its directory, ports, webhook receiver and current process."""

    data_dir: Path
    receiver: ScriptedReceiver
    ports: tuple[int, int] = field(default_factory=lambda: (free_port(), free_port()))
    process: PathgradeProcess | None = None

    def up(self) -> PathgradeProcess:
        settings = self.data_dir.parent / "realtime.yaml"
        settings.write_text(f"webhook_queue_size: {QUEUE_SIZE}\nwebhook_retries: 1\n")
        self.process = PathgradeProcess(
            ["up", "--data-dir", str(self.data_dir),
             "--grpc-port", str(self.ports[0]), "--http-port", str(self.ports[1]),
             "--alert-webhook", self.receiver.url, "--realtime-config", str(settings),
             "--status-every", "1"],
            ready_text="pathgrade is up", data_dir=self.data_dir,
        )  # fmt: skip
        return self.process

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ports[1]}/v1/traces"

    def pid(self, name: str) -> int:
        return json.loads((self.data_dir / "stack.json").read_text())["pids"][name]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("durable")
    running = Stack(directory / "stack", ScriptedReceiver(free_port()))
    running.up()
    yield running
    running.receiver.down()
    last = running.process
    if last is not None and last.process.poll() is None:  # not the one a test SIGKILLed
        assert last.terminate() == 0, last.output


def stored(process: PathgradeProcess, trace_ids: list[str]) -> tuple[int, int]:
    """(distinct spans in FINAL, rows not FINAL) of these traces."""
    where = "WHERE TraceId IN (" + ",".join(f"'{t}'" for t in trace_ids) + ")"
    final = process.scalar(f"SELECT uniqExact(TraceId, SpanId) FROM spans FINAL {where}")
    return final, process.scalar(f"SELECT count() FROM spans {where}")


def table_alerts(process: PathgradeProcess) -> set[tuple[str, str]]:
    return {(t, k) for t, k in process.sql("SELECT DISTINCT Tenant, AlertKey FROM alerts").rows}


def test_every_stored_alert_reaches_the_webhook_after_overflow_and_a_realtime_restart(
    stack: Stack,
) -> None:
    """Receiver down, a queue of 5: the alerts overflow it; the realtime process is
    SIGKILLed and comes back; once the receiver is up (answering 503, 429 or hanging up
    now and then) every alert of the table reaches it."""
    assert stack.process is not None
    stack.receiver.down()
    sent = send_demo_traces(OTLPSpanExporter(endpoint=stack.url), traces=80, seed=61)
    wait_until(lambda: stored(stack.process, sent.trace_ids)[0] == sent.spans, timeout_s=120)
    wait_until(lambda: len(table_alerts(stack.process)) > 4 * QUEUE_SIZE, timeout_s=90)
    realtime = stack.pid("realtime")
    os.kill(realtime, signal.SIGKILL)
    wait_until(lambda: stack.pid("realtime") != realtime, timeout_s=90)
    stack.receiver.up()
    more = send_demo_traces(OTLPSpanExporter(endpoint=stack.url), traces=20, seed=62)
    wait_until(lambda: stored(stack.process, more.trace_ids)[0] == more.spans, timeout_s=120)

    def delivered() -> bool:
        return table_alerts(stack.process) <= stack.receiver.delivered()

    wait_until(delivered, timeout_s=120, interval_s=1)
    assert stack.receiver.key_mismatches == 0
    alerts = table_alerts(stack.process)
    print(f"{len(alerts)} alerts, {stack.receiver.repeats()} delivered more than once")
    assert stack.receiver.requests > len(alerts)  # the script's refusals were sent again


def test_sigkill_of_up_then_up_again_stores_every_acknowledged_span(stack: Stack) -> None:
    """The store writer (in the main process) is stopped, so what the collector
    acknowledges is held only by the memory-only broker and the collector's log; SIGKILL
    of `pathgrade up` takes the broker with it; `pathgrade up` again replays the log."""
    first = stack.process
    assert first is not None
    children = [stack.pid("collector"), stack.pid("realtime"), stack.pid("broker")]
    os.kill(first.process.pid, signal.SIGSTOP)
    try:
        sent = send_demo_traces(OTLPSpanExporter(endpoint=stack.url), traces=30, seed=63)
        assert spill_on_disk(stack.data_dir / "spill") > 0  # held by the collector's log
    finally:
        os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait(timeout=30)
    wait_until(lambda: not any(process_started(pid) for pid in children), timeout_s=30)

    again = stack.up()
    wait_until(lambda: stored(again, sent.trace_ids)[0] == sent.spans, timeout_s=120)
    final, rows = stored(again, sent.trace_ids)
    assert rows >= final == sent.spans
    wait_until(lambda: spill_on_disk(stack.data_dir / "spill") == 0, timeout_s=60)  # let go
