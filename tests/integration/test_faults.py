"""Faults under a steady load (issue 15, "Done when"): about 1,000 spans/s of raw OTLP/HTTP
for 60 s into a stack of its own per fault, the five stacks one after another (side by
side, five stacks at 1,000 spans/s each outran the machine's two cores, and starved the
tests running next to this module). Each test asserts that no acknowledged span is lost (every one
is in `spans` FINAL; rows counted without FINAL too, repeats allowed and printed) and that
every alert in the `alerts` table reached the webhook once it was reachable (repeats
allowed and counted: they carry the same alert key). Default collector settings (no
content captured: the detectors decide on facts); the load is demo traffic with 6 of
every ~150 turns failing, so alerts are about 2 % of spans.

The webhook receiver answers 503, 429 or closes the connection now and then, and is down
(connections refused) for 12 s of every run. Each realtime process keeps at most 50 alerts
in memory for it, so the stalls and restarts overflow the queue, and the rest comes from
the alerts table.

In the embedded stack the main process is the store owner (migrations, store writer,
endpoint): SIGKILL of it is one fault for both meanings, followed by `pathgrade up` again
on the same directory. The store owner as a box of its own is covered too: a standalone
`pathgrade store-writer` SIGKILLed and started again, next to `pathgrade collector`,
`pathgrade realtime --data-dir` and a broker of their own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pathgrade.stack.broker import LocalBroker, ensure_topics, free_port
from pathgrade.stack.ownership import process_started
from tests.integration.conftest import PathgradeProcess, wait_until
from tests.support.steady_load import (
    ScriptedReceiver,
    SpanKey,
    SteadyLoad,
    demo_template,
    fresh_requests,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]  # the five runs in turn

LOAD_S = 60.0
REQUESTS_PER_S = 10  # of about 100 spans each: about 1,000 spans/s
FAULT_AT_S = 15.0
STALL_S = 20.0
WEBHOOK_DOWN_S = (30.0, 42.0)  # into the load: the receiver refuses connections
SETTLE_S = 420.0  # after the load, for the store and the webhook to catch up
REALTIME_SETTINGS = "webhook_queue_size: 50\nwebhook_retries: 2\n"
ALERT_LINE = re.compile(r"^\d\d:\d\d:\d\d \w+ +PG\d+ |^\+\d+ alerts in the last ")  # `up`'s


@dataclass
class Outcome:
    """What one run under a fault came to."""

    acknowledged: set[SpanKey] = field(default_factory=set)
    stored: set[SpanKey] = field(default_factory=set)  # of the acknowledged, FINAL
    stored_rows: int = 0  # rows of `spans`, not FINAL (repeats included)
    table_alerts: set[tuple[str, str]] = field(default_factory=set)
    webhook_alerts: set[tuple[str, str]] = field(default_factory=set)
    webhook_repeats: int = 0
    key_mismatches: int = 0
    load_retries: int = 0
    rejected: int = 0
    settled_s: float = 0.0  # from the end of the load until the counts matched
    error: str = ""

    def report(self, name: str) -> str:
        return (
            f"{name}: acknowledged {len(self.acknowledged):,} spans ({self.load_retries} "
            f"requests sent again), stored {len(self.stored):,} FINAL / {self.stored_rows:,} "
            f"rows; alerts {len(self.table_alerts):,} in the table, "
            f"{len(self.webhook_alerts):,} at the webhook ({self.webhook_repeats:,} repeats); "
            f"settled {self.settled_s:.0f} s after the load"
        )


class Run:
    """One fault's stack, load and receiver."""

    def __init__(self, directory: Path, seed: int, template: Any) -> None:
        self.directory = directory
        self.receiver = ScriptedReceiver(free_port())
        self.ports = free_port(), free_port()
        requests = fresh_requests(template, 100, int(LOAD_S * REQUESTS_PER_S), seed)
        self.load = SteadyLoad(self.ports[1], requests, 1 / REQUESTS_PER_S)
        self.realtime_config = directory / "realtime.yaml"
        directory.mkdir(parents=True, exist_ok=True)
        self.realtime_config.write_text(REALTIME_SETTINGS)
        self.processes: list[PathgradeProcess] = []

    def up(self) -> PathgradeProcess:
        """`pathgrade up` on the run's directory and ports."""
        stack = PathgradeProcess(
            ["up", "--data-dir", str(self.directory / "stack"),
             "--grpc-port", str(self.ports[0]), "--http-port", str(self.ports[1]),
             "--alert-webhook", self.receiver.url,
             "--realtime-config", str(self.realtime_config), "--status-every", "5"],
            ready_text="pathgrade is up", data_dir=self.directory / "stack",
        )  # fmt: skip
        self.processes.append(stack)
        return stack

    def pid(self, name: str) -> int:
        return json.loads((self.directory / "stack" / "stack.json").read_text())["pids"][name]

    def drive(self, fault: Callable[[], PathgradeProcess], store: PathgradeProcess) -> Outcome:
        """Run the load with `fault` at FAULT_AT_S (it returns the process to ask the
        store through afterwards), take the webhook down for a while, wait for the store
        and the webhook to catch up, and count."""
        self.load.start()
        wait_until(lambda: self.load.elapsed() >= FAULT_AT_S, timeout_s=LOAD_S)
        store = fault()
        wait_until(lambda: self.load.elapsed() >= WEBHOOK_DOWN_S[0], timeout_s=LOAD_S * 3)
        self.receiver.down()
        wait_until(lambda: self.load.elapsed() >= WEBHOOK_DOWN_S[1], timeout_s=LOAD_S * 3)
        self.receiver.up()
        self.load.join(timeout_s=LOAD_S * 6)
        outcome = Outcome(acknowledged=set(self.load.acknowledged))
        outcome.load_retries, outcome.rejected = self.load.retries, self.load.rejected
        ended = time.monotonic()
        deadline = ended + SETTLE_S
        wait_until(lambda: self._stored(store, outcome) >= outcome.acknowledged,
                   timeout_s=max(1.0, deadline - time.monotonic()), interval_s=2)  # fmt: skip
        outcome.stored_rows = store.scalar("SELECT count() FROM spans")
        try:
            wait_until(lambda: self._delivered(store, outcome),
                       timeout_s=max(1.0, deadline - time.monotonic()), interval_s=2)  # fmt: skip
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {self._undelivered(store, outcome)}") from None
        outcome.settled_s = time.monotonic() - ended
        return outcome

    def _stored(self, store: PathgradeProcess, outcome: Outcome) -> set[SpanKey]:
        """The acknowledged spans in `spans` FINAL (the run's store holds only its own);
        read once there are at least as many distinct spans as acknowledged ones."""
        if store.scalar("SELECT uniqExact(TraceId, SpanId) FROM spans") < len(outcome.acknowledged):
            return outcome.stored
        rows = store.sql("SELECT TraceId, SpanId FROM spans FINAL").rows
        outcome.stored = {(trace, span) for trace, span in rows} & outcome.acknowledged
        return outcome.stored

    def _delivered(self, store: PathgradeProcess, outcome: Outcome) -> bool:
        """Whether every alert of the table reached the webhook; counts both."""
        rows = store.sql("SELECT DISTINCT Tenant, AlertKey FROM alerts").rows
        outcome.table_alerts = {(tenant, key) for tenant, key in rows}
        outcome.webhook_alerts = self.receiver.delivered()
        outcome.webhook_repeats = self.receiver.repeats()
        outcome.key_mismatches = self.receiver.key_mismatches
        return bool(outcome.table_alerts) and outcome.table_alerts <= outcome.webhook_alerts

    def _undelivered(self, store: PathgradeProcess, outcome: Outcome) -> str:
        """The alerts of the table the webhook never got: their numbering and detection
        (partition, number, code, detected at), to tell which path lost them."""
        missing = sorted(key for _, key in outcome.table_alerts - outcome.webhook_alerts)
        if not missing:
            return f"{len(outcome.table_alerts)} alerts in the table"
        rows = store.sql(
            "SELECT SpansPartition, PartitionSeq, Code, DetectedAt FROM alerts "
            f"WHERE AlertKey IN ({', '.join(repr(key) for key in missing[:50])}) "
            "ORDER BY SpansPartition, PartitionSeq"
        ).rows
        return f"{len(missing)} of {len(outcome.table_alerts)} never reached the webhook: {rows}"

    def output_tails(self, lines: int = 60) -> str:
        """The last `lines` lines each process of the run printed, its alert lines left
        out (its status lines every 5 s and its warnings stay), to tell a failed run's
        cause."""
        return "\n".join(
            f"--- pathgrade {' '.join(process.args[:1])} (pid {process.process.pid}):\n"
            + "\n".join([line for line in process.lines if not ALERT_LINE.match(line)][-lines:])
            for process in self.processes
        )

    def close(self) -> None:
        for process in self.processes:
            if process.process.poll() is None:
                process.terminate()
        self.receiver.down()


def _running(pid: int) -> bool:
    return process_started(pid) is not None


def kill_main_and_up_again(run: Run) -> Outcome:
    """SIGKILL of `pathgrade up` (the embedded store owner), then `pathgrade up` again on
    the same directory and ports."""
    first = run.up()
    children = [run.pid("collector"), run.pid("realtime")]

    def fault() -> PathgradeProcess:
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=30)
        wait_until(lambda: not any(_running(pid) for pid in children), timeout_s=30)
        return run.up()

    return run.drive(fault, first)


def kill_child(name: str) -> Callable[[Run], Outcome]:
    """SIGKILL of the stack's `name` child process, which the stack restarts."""

    def scenario(run: Run) -> Outcome:
        stack = run.up()

        def fault() -> PathgradeProcess:
            pid = run.pid(name)
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: run.pid(name) != pid, timeout_s=90)
            return stack

        return run.drive(fault, stack)

    return scenario


def stall_broker(run: Run) -> Outcome:
    """SIGSTOP of the bundled broker for STALL_S, then SIGCONT."""
    stack = run.up()

    def fault() -> PathgradeProcess:
        broker = run.pid("broker")
        os.kill(broker, signal.SIGSTOP)
        try:
            time.sleep(STALL_S)
        finally:
            os.kill(broker, signal.SIGCONT)
        return stack

    return run.drive(fault, stack)


def kill_store_writer_box(run: Run) -> Outcome:
    """The production boxes on a broker of their own: SIGKILL of `pathgrade store-writer`
    (the store's owner), then the same command again on its directory."""
    broker = LocalBroker(log_path=run.directory / "broker.log")
    broker.start()
    ensure_topics(broker.bootstrap)
    store_dir = run.directory / "store"
    writer_args = ["store-writer", "--kafka", broker.bootstrap, "--data-dir", str(store_dir)]
    try:
        writer = PathgradeProcess(writer_args, ready_text="store writer:", data_dir=store_dir)
        run.processes.append(writer)
        run.processes.append(PathgradeProcess(
            ["realtime", "--kafka", broker.bootstrap, "--data-dir", str(store_dir),
             "--alert-webhook", run.receiver.url, "--config", str(run.realtime_config),
             "--no-shared-history"],
            ready_text="realtime:",
        ))  # fmt: skip
        run.processes.append(PathgradeProcess(
            ["collector", "--kafka", broker.bootstrap, "--spill-dir", str(run.directory / "spill"),
             "--grpc-port", str(run.ports[0]), "--http-port", str(run.ports[1])],
            ready_text="collector: OTLP/gRPC",
        ))  # fmt: skip

        def fault() -> PathgradeProcess:
            writer.kill()
            again = PathgradeProcess(writer_args, ready_text="store writer:", data_dir=store_dir)
            run.processes.append(again)
            return again

        return run.drive(fault, writer)
    finally:
        run.close()
        broker.stop()


SCENARIOS: dict[str, Callable[[Run], Outcome]] = {
    "kill_main": kill_main_and_up_again,
    "kill_store_writer": kill_store_writer_box,
    "kill_collector": kill_child("collector"),
    "kill_realtime": kill_child("realtime"),
    "stall_broker": stall_broker,
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every scenario in turn, each with its own stack."""
    template = demo_template()
    runs = {
        name: Run(tmp_path_factory.mktemp(name), seed, template)
        for seed, name in enumerate(SCENARIOS)
    }

    def attempt(name: str) -> Outcome:
        try:
            return SCENARIOS[name](runs[name])
        except Exception as exc:  # reported by the scenario's own test
            run = runs[name]
            outcome = Outcome(error=f"{type(exc).__name__}: {exc}\n{run.output_tails()}")
            outcome.acknowledged = set(run.load.acknowledged)
            outcome.load_retries, outcome.rejected = run.load.retries, run.load.rejected
            return outcome
        finally:
            runs[name].close()

    results = {name: attempt(name) for name in SCENARIOS}
    for name, outcome in results.items():
        print(outcome.report(name))
    yield results


def check(outcome: Outcome) -> None:
    assert not outcome.error, outcome.error
    assert outcome.rejected == 0
    assert len(outcome.acknowledged) > 0.8 * LOAD_S * REQUESTS_PER_S * 100  # the load ran
    lost = outcome.acknowledged - outcome.stored
    assert not lost, f"{len(lost)} acknowledged spans not stored, e.g. {sorted(lost)[:3]}"
    assert outcome.stored_rows >= len(outcome.stored)
    missing = outcome.table_alerts - outcome.webhook_alerts
    assert not missing, f"{len(missing)} alerts of the table never reached the webhook"
    assert len(outcome.table_alerts) > 100 and outcome.key_mismatches == 0


def test_sigkill_of_the_main_process_then_up_again(outcomes: dict[str, Outcome]) -> None:
    check(outcomes["kill_main"])


def test_sigkill_of_a_store_writer_box_then_again(outcomes: dict[str, Outcome]) -> None:
    check(outcomes["kill_store_writer"])


def test_sigkill_of_the_collector(outcomes: dict[str, Outcome]) -> None:
    check(outcomes["kill_collector"])


def test_sigkill_of_the_realtime_process(outcomes: dict[str, Outcome]) -> None:
    check(outcomes["kill_realtime"])


def test_broker_stopped_for_20_s(outcomes: dict[str, Outcome]) -> None:
    check(outcomes["stall_broker"])
