"""Where each framework of the matrix runs: the test environment itself (its packages are
in pyproject's `test` extra) or a virtualenv of its own, created from PyPI with uv on
first use and cached outside the clone, keyed by its pinned requirements and Python.

Frameworks pin conflicting versions of openai, pydantic and the OpenTelemetry SDK (Google
ADK wants the SDK <= 1.44, Strands a semantic-conventions package the newest SDK
excludes), so one shared environment would hold some of them back or fail to resolve;
a venv each keeps every framework at its newest release and lets one framework's
install failure name itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from uv import find_uv_bin

CACHE = Path(
    os.environ.get("PATHGRADE_FRAMEWORKS_CACHE", Path.home() / ".cache" / "pathgrade-frameworks")
)
"""Where the framework venvs are kept (`$PATHGRADE_FRAMEWORKS_CACHE` overrides)."""
APP_REQUIREMENTS = ("opentelemetry-exporter-otlp-proto-http", "opentelemetry-processor-baggage")
"""What app.py itself needs in every venv (the framework picks the SDK version)."""
INSTALL_TIMEOUT_S = 900


@dataclass(frozen=True)
class Environment:
    """A framework of the matrix: its adapter and where it runs."""

    slug: str
    adapter: str
    requirements: tuple[str, ...] | None = None
    """Pinned requirements of its own venv; None: the test environment."""

    @property
    def module(self) -> str:
        return f"tests.integration.frameworks.adapters.{self.adapter}"

    @property
    def service(self) -> str:
        return f"fw-{self.slug}"

    def venv(self) -> Path:
        """Its venv's directory, keyed by the requirements and this Python's version."""
        key = "\n".join([sys.version.split()[0], *sorted(self.requirements or ())])
        return CACHE / f"{self.slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def python(self) -> tuple[str, float]:
        """The interpreter to run the adapter with, and the seconds spent installing it
        (0 when it was there already). Concurrent test workers wait on a file lock."""
        if self.requirements is None:
            return sys.executable, 0.0
        venv = self.venv()
        python = venv / "bin" / "python"
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(f"{venv}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (venv / ".complete").exists():
                return str(python), 0.0
            started = time.monotonic()
            uv = find_uv_bin()
            run([uv, "venv", "--quiet", "--clear", "--python", sys.executable, str(venv)])
            run([uv, "pip", "install", "--quiet", "--python", str(python),
                 *self.requirements, *APP_REQUIREMENTS])  # fmt: skip
            (venv / ".complete").write_text("\n".join(self.requirements) + "\n")
            return str(python), time.monotonic() - started


def run(command: list[str]) -> None:
    """Run an install step; fail naming the command and its output."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-3000:]}")


ENVIRONMENTS: dict[str, Environment] = {
    env.slug: env
    for env in (
        Environment("pydantic-ai", "pydantic_ai", ("pydantic-ai-slim[openai]==2.68.0",)),
        Environment("langgraph-openinference", "langgraph_openinference"),
        Environment("langgraph-openllmetry", "langgraph_openllmetry"),
    )
}
"""The frameworks of the matrix, by slug (the test ids and the services' names)."""
