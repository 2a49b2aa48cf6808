"""Hand-offs on the real stack (issue 44): the OpenAI Agents SDK under OpenInference (in its
own venv) and LangGraph under OpenLLMetry, each a triage and a billing agent on the
scripted model, export with the official OTLP exporter to one `pathgrade up` on default
settings (nothing captured) whose policy declares only the inverse tools. Each failure
story's hand-off detector alerts (a redo, an undo, a lost identity, a value asked for
again, a ping-pong); the clean hand-off raises no alert at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.frameworks.environments import ENVIRONMENTS
from tests.integration.handoffs.scripted_model import ScriptedModel
from tests.integration.handoffs.stories import INVERSES, STORIES
from tests.integration.test_facts import failed_tool_trace
from tests.integration.test_realtime import Webhook
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

HANDOFF_CODES = {"PG119", "PG120", "PG121", "PG122"}
APP_TIMEOUT_S = 600
ALERT_WAIT_S = 60


@dataclass(frozen=True)
class Framework:
    """A framework's app module and the Python it runs under (None: this one)."""

    module: str
    environment: str | None = None

    def python(self) -> str:
        if self.environment is None:
            return sys.executable
        return ENVIRONMENTS[self.environment].python()[0]


FRAMEWORKS = {
    "openai-agents": Framework("tests.integration.handoffs.openai_agents_app", "openai-agents"),
    "langgraph": Framework("tests.integration.handoffs.langgraph_app"),
}


@dataclass
class Stack:
    process: PathgradeProcess
    http_port: int
    webhook: Webhook
    model: ScriptedModel

    @property
    def otlp(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def alerts(self, trace_ids: set[str]) -> list[dict[str, Any]]:
        return [a for a in list(self.webhook.alerts) if a["trace_id"] in trace_ids]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`pathgrade up` on default settings, its policy only the inverse tools, alerts to a
    webhook, and the scripted model."""
    data_dir = tmp_path_factory.mktemp("handoffs")
    policy = data_dir.parent / "handoffs-policy.yaml"
    policy.write_text(f"version: 1\ndefaults:\n  inverses: {json.dumps(INVERSES)}\n")
    webhook = Webhook()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    process, _, http_port = start_stack(
        data_dir, "--policy", str(policy), "--alert-webhook", webhook.url
    )
    with ScriptedModel() as model:
        yield Stack(process, http_port, webhook, model)
    try:
        assert process.terminate() == 0, process.output
    finally:
        webhook.shutdown()


def run_app(stack: Stack, framework: Framework, out: Path) -> dict[str, Any]:
    """Run every story through the framework's app; what each story made."""
    done = subprocess.run(
        [
            framework.python(), "-m", framework.module, "--otlp", stack.otlp,
            "--model-url", stack.model.url, "--service", "support", "--out", str(out),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=APP_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-5000:]
    stories: dict[str, Any] = json.loads(out.read_text())["stories"]
    return stories


@pytest.mark.timeout(APP_TIMEOUT_S + 300)
@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_each_handoff_failure_alerts_and_the_clean_handoff_raises_nothing(
    stack: Stack, name: str, tmp_path: Path
) -> None:
    stories = run_app(stack, FRAMEWORKS[name], tmp_path / f"{name}.json")
    for story, made in stories.items():
        assert len(made["traces"]) == 1, f"{story}: one trace per story, got {made['traces']}"
        assert made["answer"] == STORIES[story].steps[-1].answer, f"{story} did not play out"
    trace_of = {story: made["traces"][0] for story, made in stories.items()}

    def violations(story: str) -> set[str]:
        alerts = stack.alerts({trace_of[story]})
        return {a["code"] for a in alerts if a["kind"] == "violation"}

    def all_alerted() -> bool:
        return all(set(s.expected) <= violations(n) for n, s in STORIES.items())

    with contextlib.suppress(AssertionError):  # the assertions below name what is missing
        wait_until(all_alerted, timeout_s=ALERT_WAIT_S)
    # one consumer grades turns in the order they went quiet: once a trace sent after all
    # of them alerted, every story's alerts are in
    sentinel = failed_tool_trace(stack.otlp)
    wait_until(lambda: stack.alerts({sentinel}), timeout_s=ALERT_WAIT_S)
    assert stack.alerts({trace_of["clean_handoff"]}) == []
    found = {
        story: sorted((a["code"], a["kind"], a["reason"]) for a in stack.alerts({trace_of[story]}))
        for story in STORIES
    }
    for story, spec in STORIES.items():
        handoff_codes = {c for c in violations(story) if c in HANDOFF_CODES}
        assert handoff_codes == set(spec.expected), (story, found)
    problems = {
        a["details"]["problem"]
        for story in ("lost_identity", "asked_again")
        for a in stack.alerts({trace_of[story]})
        if a["code"] == "PG121"
    }
    assert problems == {"identity_missing", "asked_again"}
