"""The test runner of `bench/mutation.py`: a process that imports pytest and the tests'
third-party libraries once, then runs each mutant's tests in a fork of itself.

Started in the scratch copy (with `bench/mutation_site` on PYTHONPATH) as
`python bench/mutation_runner.py PYTEST-ARGS...`; it first collects them in a fork and keeps the
libraries that collection imported from outside the copy (grpc, chDB and clickhouse-connect
excepted: a fork hangs on what they start), then reads one JSON request a line on stdin,
`{"args": [pytest arguments], "timeout_s": 30, "log": "/path/of/output"}`, and answers one
line on stdout, `{"exit_code": 0, "timed_out": false}`. The code under test and the tests
are imported afresh in every fork, so each sees the mutant on disk; a fork that outlives
its timeout is killed with its process group.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOT_PRELOADED = (
    "grpc", "chdb", "clickhouse_connect", "tests", "pathgrade", "__main__", "__mp_main__",
)  # fmt: skip
POLL_S = 0.01
running: list[int] = []  # the fork at work, if any (its process group is killed with us)


def stop(signum: int, frame: object) -> None:
    """SIGTERM: kill the fork at work and its process group, then exit."""
    for pid in running:
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    os._exit(128 + signum)


def in_fork(work: Any, log: str, timeout_s: float) -> tuple[int, bool]:
    """Run `work()` (returning an exit code) in a child with its output in `log`; its exit
    code, and whether it was killed at `timeout_s`."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 70
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.setpgid(0, 0)
            descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(descriptor, 1)
            os.dup2(descriptor, 2)
            code = int(work())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    running.append(pid)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status), False
            time.sleep(POLL_S)
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return -signal.SIGKILL, True
    finally:
        running.remove(pid)


def libraries(args: list[str], log: str) -> list[str]:
    """The modules from outside the copy that collecting the tests of pytest `args` imports."""
    listing = Path(log).with_suffix(".modules")

    def collect() -> int:
        import pytest

        code = pytest.main(["--collect-only", *args])
        names = [
            name
            for name, module in list(sys.modules.items())
            if not name.startswith(NOT_PRELOADED)
            and not str(getattr(module, "__file__", None) or ROOT).startswith(str(ROOT))
        ]
        listing.write_text("\n".join(names))
        return int(code)

    code, _ = in_fork(collect, log, 600)
    if code != 0:
        sys.exit(f"collecting {args} failed (exit {code}); see {log}")
    return listing.read_text().split()


def main() -> None:
    import pytest

    signal.signal(signal.SIGTERM, stop)
    log = str(ROOT / ".mutation-runner.log")
    for name in libraries(sys.argv[1:], log):
        try:
            importlib.import_module(name)
        except Exception:  # a module that imports only inside pytest: left to each fork
            continue
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        code, timed_out = in_fork(
            lambda args=request["args"]: pytest.main(args), request["log"], request["timeout_s"]
        )
        print(json.dumps({"exit_code": code, "timed_out": timed_out}), flush=True)


if __name__ == "__main__":
    main()
