"""What the same-run server benches share (bench/http_receiver.py, bench/store_endpoint.py):
each variant's server runs alone in a child process of its checkout's python, the parent
drives it and reads the child's CPU seconds (all its threads) around each phase, and the
variants alternate round by round.

The child announces what the parent needs (a JSON line: its ports...) with
`answer_commands`, then answers the parent's commands on stdin ("cpu": its CPU seconds;
"stop").
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

Result = TypeVar("Result")


def answer_commands(announcement: dict[str, Any]) -> None:
    """Child: print `announcement`, then answer "cpu" with this process's CPU seconds
    until "stop" (or the end of stdin)."""
    print(json.dumps(announcement), flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            break
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"cpu_s": usage.ru_utime + usage.ru_stime}), flush=True)


class Child:
    """A server child of another python: what it announced, and its CPU seconds."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._commands, self._answers = process.stdin, process.stdout
        self.announcement: dict[str, Any] = json.loads(self._answers.readline())

    def cpu(self) -> float:
        """The child's CPU seconds so far."""
        self._commands.write("cpu\n")
        self._commands.flush()
        return json.loads(self._answers.readline())["cpu_s"]

    def stop(self) -> None:
        self._commands.write("stop\n")
        self._commands.flush()


@contextmanager
def child(python: str, script: str, flag: str) -> Iterator[Child]:
    """`python script flag` running until the block ends (stopped, then killed if it
    lingers)."""
    process = subprocess.Popen(
        [python, script, flag], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=tempfile.gettempdir(),
    )  # fmt: skip
    try:
        served = Child(process)
        yield served
        served.stop()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def alternate(
    against: str, rounds: int, measure: Callable[[str], Result], line: Callable[[Result], str]
) -> dict[str, list[Result]]:
    """`measure(python)` of each variant ("against": `against`, "this": this python),
    alternating round by round, each run printed as `line(result)`; the results by
    variant."""
    variants = {"against": against, "this": sys.executable}
    runs: dict[str, list[Result]] = {label: [] for label in variants}
    for round_ in range(rounds):
        for label, python in variants.items():
            result = measure(python)
            runs[label].append(result)
            print(f"round {round_ + 1} {label:<8} {line(result)}", flush=True)
    return runs
