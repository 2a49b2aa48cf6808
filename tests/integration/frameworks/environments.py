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
    tool_prefix: str = ""
    """What the framework puts before a tool's name (Semantic Kernel: its plugin's)."""

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
            run(
                [
                    uv,
                    "pip",
                    "install",
                    "--quiet",
                    "--python",
                    str(python),
                    *self.requirements,
                    *APP_REQUIREMENTS,
                ]
            )
            (venv / ".complete").write_text("\n".join(self.requirements) + "\n")
            return str(python), time.monotonic() - started


def run(command: list[str]) -> None:
    """Run an install step; fail naming the command and its output."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-3000:]}")


OPENINFERENCE = "openinference-instrumentation-"
ENVIRONMENTS: dict[str, Environment] = {
    env.slug: env
    for env in (
        Environment("pydantic-ai", "pydantic_ai", ("pydantic-ai-slim[openai]==2.68.0",)),
        Environment(
            "openai-agents",
            "openai_agents",
            ("openai-agents==0.24.0", f"{OPENINFERENCE}openai-agents==2.6.0"),
        ),
        Environment("google-adk", "google_adk", ("google-adk==2.13.0",)),
        Environment("strands", "strands", ("strands-agents[openai]==1.62.0",)),
        Environment(
            "crewai",
            "crewai",
            ("crewai==1.15.30", f"{OPENINFERENCE}crewai==1.1.21", f"{OPENINFERENCE}openai==0.1.66"),
        ),
        Environment(
            "smolagents",
            "smolagents",
            ("smolagents[openai]==1.26.0", f"{OPENINFERENCE}smolagents==0.1.43"),
        ),
        Environment(
            "llamaindex",
            "llamaindex",
            (
                "llama-index-core==0.14.25",
                "llama-index-llms-openai==0.8.3",
                f"{OPENINFERENCE}llama-index==4.6.1",
            ),
        ),
        Environment(
            "semantic-kernel",
            "semantic_kernel",
            ("semantic-kernel==1.45.0",),
            tool_prefix="support-",
        ),
        Environment(
            "autogen",
            "autogen",
            (
                "autogen-agentchat==0.7.5",
                "autogen-ext[openai]==0.7.5",
                f"{OPENINFERENCE}autogen-agentchat==0.1.22",
            ),
        ),
        Environment(
            "agno", "agno", ("agno==3.1.10", "openai==3.63.0", f"{OPENINFERENCE}agno==1.0.15")
        ),
        Environment("langgraph-openinference", "langgraph_openinference"),
        Environment("langgraph-openllmetry", "langgraph_openllmetry"),
    )
}
"""The frameworks of the matrix, by slug (the test ids and the services' names)."""
