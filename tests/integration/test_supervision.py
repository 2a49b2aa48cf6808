"""Process supervision of `pathgrade up` on the real stack: children end with a killed
main process, a new stack on the same directory stops what is left, takes the same ports
and drains the spill (acknowledged vs stored, FINAL and not); bad settings are refused
before any process starts; Ctrl-C works while starting; `pathgrade status` says how old
its snapshot is and a closed pipe ends commands quietly. (A child signalled on its own
is restarted: test_resilience.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import free_port
from pathgrade.stack.ownership import process_started
from tests.integration.conftest import PathgradeProcess, spill_on_disk, wait_until
from tests.integration.test_resilience import distinct_and_final

pytestmark = pytest.mark.integration


def pathgrade(*args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """`pathgrade ARGS` in a session of its own, with SIGINT's default action (as started
    from a terminal, even when the tests run as a background job that ignores SIGINT)."""
    return subprocess.Popen(
        [sys.executable, "-m", "pathgrade.cli", *args],
        stdout=stdout, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=_default_sigint,
    )  # fmt: skip


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def up(data_dir: Path, grpc_port: int, http_port: int, *extra: str) -> PathgradeProcess:
    return PathgradeProcess(
        ["up", "--data-dir", str(data_dir), "--grpc-port", str(grpc_port),
         "--http-port", str(http_port), "--status-every", "1", *extra],
        ready_text="pathgrade is up",
        data_dir=data_dir,
    )  # fmt: skip


def running(pid: int) -> bool:
    return process_started(pid) is not None


def test_a_killed_main_process_takes_its_children_and_a_restart_recovers(
    tmp_path: Path,
) -> None:
    """SIGKILL of `pathgrade up` while the broker is stalled and the collector answers from
    its spill: the collector and realtime children exit; the stalled broker is left, and
    the next `pathgrade up` on the directory stops it, listens on the same ports and stores
    every acknowledged span once (the spill drains into its fresh broker)."""
    config = tmp_path / "collector.yaml"
    config.write_text("ack_timeout_s: 1.0\n")
    ports = free_port(), free_port()
    first = up(tmp_path, *ports, "--config", str(config))
    url = f"http://127.0.0.1:{ports[1]}/v1/traces"
    state = json.loads((tmp_path / "stack.json").read_text())
    children = [state["pids"]["collector"], state["pids"]["realtime"]]
    broker = state["pids"]["broker"]
    reused = subprocess.Popen(["sleep", "300"])  # stands for a pid taken by another program
    try:
        stored_before = send_demo_traces(OTLPSpanExporter(endpoint=url), traces=10, seed=41)
        every, total = list(stored_before.trace_ids), stored_before.spans
        wait_until(lambda: distinct_and_final(first, every) == (total, total))
        # stored and committed: the collector's log lets it go, so a restart replays none
        wait_until(lambda: spill_on_disk(tmp_path / "spill") == 0)
        os.kill(broker, signal.SIGSTOP)
        spilled = send_demo_traces(OTLPSpanExporter(endpoint=url, timeout=60), traces=10, seed=42)
        every += spilled.trace_ids
        total += spilled.spans
        assert spill_on_disk(tmp_path / "spill") > 0  # held by the collector's log
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.wait(timeout=30)
        wait_until(lambda: not any(running(pid) for pid in children), timeout_s=30)
        # each child wrote its line before it exited; the reader of this process's pipe
        # may not have taken it yet (the assert below shows the output if it never comes)
        ended = "the pathgrade up process ended; exiting"
        with suppress(AssertionError):
            wait_until(lambda: first.output.count(ended) >= 2, timeout_s=10)
        assert first.output.count(ended) == 2, first.output
        assert running(broker)  # stopped, it cannot act on its parent's death
        state = json.loads((tmp_path / "stack.json").read_text())
        state["pids"]["decoy"] = reused.pid
        state["started"]["decoy"] = (process_started(reused.pid) or 0) + 1
        (tmp_path / "stack.json").write_text(json.dumps(state))

        second = up(tmp_path, *ports)
        try:
            assert second.output_has(f"stopped broker (pid {broker}), left running by an earlier")
            assert not running(broker) and reused.poll() is None  # the reused pid left alone
            wait_until(lambda: distinct_and_final(second, every) == (total, total), timeout_s=120)
            assert (
                second.scalar(
                    f"SELECT count() FROM spans WHERE TraceId IN ({','.join(map(repr, every))})"
                )
                == total
            )  # each span stored once, not FINAL too
            wait_until(lambda: spill_on_disk(tmp_path / "spill") == 0)  # stored: let go
            check_status_age_and_closed_pipes(tmp_path)
        finally:
            assert second.terminate() == 0, second.output
    finally:
        reused.kill()
        reused.wait()
        if running(broker):
            os.kill(broker, signal.SIGKILL)


def check_status_age_and_closed_pipes(data_dir: Path) -> None:
    """`pathgrade status` names its snapshot's age; a closed pipe ends commands quietly."""
    wait_until(lambda: "taken" in pathgrade("status", "--data-dir", str(data_dir)).communicate()[0])
    status = pathgrade("status", "--data-dir", str(data_dir))
    first_line = status.communicate(timeout=60)[0].splitlines()[0]
    assert first_line.startswith("status: in ") and first_line.endswith(" s ago)"), first_line
    for args in (["status"], ["sql", "SELECT number FROM numbers(100000)"]):
        closed = pathgrade(*args, "--data-dir", str(data_dir))
        assert closed.stdout is not None
        closed.stdout.close()  # `| head -0`: the reader is gone before anything is written
        _, errors = closed.communicate(timeout=60)
        assert (closed.returncode, errors) == (141, ""), errors


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--http-port", "99999"], "--http-port 99999: Input should be less than or equal to"),
        (["--max-body-bytes", "0"], "--max-body-bytes 0: Input should be greater than 0"),
        (["--tokens-file", "/no/such/tokens.yaml"], "--tokens-file /no/such/tokens.yaml: "),
    ],
)
def test_bad_settings_are_refused_before_any_process_starts(
    tmp_path: Path, flags: list[str], named: str
) -> None:
    refused = pathgrade("up", "--data-dir", str(tmp_path / "store"), *flags)
    out, errors = refused.communicate(timeout=120)
    assert refused.returncode == 2
    assert errors.splitlines() == [f"pathgrade: {errors.strip().removeprefix('pathgrade: ')}"]
    assert named in errors and "Traceback" not in errors + out
    assert not (tmp_path / "store").exists()  # no broker, store or spill was started


def test_ctrl_c_while_waiting_for_kafka_stops_at_once(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent_broker:  # accepts, never answers
        address = f"127.0.0.1:{silent_broker.getsockname()[1]}"
        starting = pathgrade("up", "--data-dir", str(tmp_path), "--kafka", address)
        silent_broker.settimeout(120)
        connection, _ = silent_broker.accept()  # `up` is waiting for Kafka now
        os.killpg(starting.pid, signal.SIGINT)
        connection.close()
    out, errors = starting.communicate(timeout=60)
    assert starting.returncode == 130 and "Traceback" not in errors + out, errors
