"""Integration fixtures: the real Tansu broker, real chDB stores behind real `pathgrade`
processes, and the official OTLP exporters. Nothing here is mocked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pathgrade.batch_plane.store.remote import RemoteStore
from pathgrade.schemas.store import QueryResult

from pathgrade.stack.broker import LocalBroker, ensure_topics, free_port

pytestmark = pytest.mark.integration

OUTPUT_TAIL_LINES = 200  # of each pathgrade process a failed test started, in its report
_started: list[PathgradeProcess] = []  # the test's processes and running ones, for its report


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report ends with the last lines of every pathgrade process it started
    (the stack's own account of what it was doing), so a failure in CI can be read there."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for process in _started:
            tail = "\n".join(process.lines[-OUTPUT_TAIL_LINES:])
            report.sections.append((f"pathgrade {' '.join(process.args[:1])} output", tail))
    if report.when == "teardown":  # a module's stack, still running, stays for its next tests
        _started[:] = [process for process in _started if process.process.poll() is None]


def wait_until(check: Callable[[], Any], timeout_s: float = 60, interval_s: float = 0.25) -> Any:
    """Poll `check` until it returns a truthy value; fail with its last value."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s} s (last value: {last!r})")


def spill_on_disk(spill_dir: Path) -> int:
    """Bytes in the segment files of a collector's spill (its log) in `spill_dir`."""
    return sum(path.stat().st_size for path in spill_dir.glob("spill-*.log"))


class PathgradeProcess:
    """One `pathgrade <command>` process, its output captured line by line."""

    def __init__(self, args: list[str], ready_text: str, data_dir: Path | None = None) -> None:
        self.args = args
        self.data_dir = data_dir
        self.lines: list[str] = []
        _started.append(self)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pathgrade.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_until(
            lambda: self.output_has(ready_text) or self.process.poll() is not None, timeout_s=90
        )
        if not self.output_has(ready_text):
            raise AssertionError(f"pathgrade {args[0]} did not start:\n{self.output}")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def output_has(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def owner(self) -> RemoteStore:
        """The stack's store through its loopback endpoint, with the owner's token."""
        assert self.data_dir is not None
        state = json.loads((self.data_dir / "stack.json").read_text())
        return RemoteStore(state["query_url"], state["token"])

    def sql(self, query: str) -> QueryResult:
        return self.owner().query(query, readonly=True)

    def scalar(self, query: str) -> Any:
        return self.sql(query).rows[0][0]

    def terminate(self, timeout_s: float = 120) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def interrupt(self, timeout_s: float = 120) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the whole process group."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self.process.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


def start_stack(data_dir: Path, *extra: str) -> tuple[PathgradeProcess, int, int]:
    """`pathgrade up` on free ports; returns the process and its gRPC and HTTP ports."""
    grpc_port, http_port = free_port(), free_port()
    stack = PathgradeProcess(
        ["up", "--data-dir", str(data_dir), "--grpc-port", str(grpc_port),
         "--http-port", str(http_port), *extra],
        ready_text="pathgrade is up",
        data_dir=data_dir,
    )  # fmt: skip
    return stack, grpc_port, http_port


def start_collector(
    bootstrap: str, spill_dir: Path, *extra: str
) -> tuple[PathgradeProcess, int, int]:
    """`pathgrade collector` on free ports; returns the process and its gRPC and HTTP ports."""
    grpc_port, http_port = free_port(), free_port()
    collector = PathgradeProcess(
        ["collector", "--kafka", bootstrap, "--spill-dir", str(spill_dir),
         "--grpc-port", str(grpc_port), "--http-port", str(http_port), *extra],
        ready_text="collector: OTLP/gRPC",
    )  # fmt: skip
    return collector, grpc_port, http_port


@contextmanager
def local_broker(log_path: Path) -> Iterator[LocalBroker]:
    """A Tansu broker of the test's own, with pathgrade's topics; stopped after."""
    local = LocalBroker(log_path=log_path)
    local.start()
    ensure_topics(local.bootstrap)
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    """A Tansu broker of the test's own, with pathgrade's topics."""
    with local_broker(tmp_path / "broker.log") as local:
        yield local
