"""The offline harness on a real `pathgrade up` with DEFAULT privacy settings (nothing
captured): per-case checks, detector metrics and `sound`, the end-state oracle through an
in-process agent's method and an HTTP agent's state endpoint, and the gate's per-case
report, for the seeded-defect builds that need them."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from examples.seeded_defects.agent import CATCHING_METRICS
from pathgrade.stack.broker import free_port
from tests.integration.conftest import PathgradeProcess, start_stack

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seeded_defects"
SUITE = str(EXAMPLE / "suite.yaml")
HARNESS_BUILDS = ("eager_ticket", "plan_guard", "placeholder_reference")
"""The builds gated here (test_facts.py gates the others on its default stack)."""


class Stack:
    def __init__(self, process: PathgradeProcess, data_dir: Path, http_port: int) -> None:
        self.process, self.data_dir, self.http_port = process, data_dir, http_port

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip

    def evaluate(self, run_id: str, *agent: str) -> str:
        done = self.cli("eval", SUITE, *agent, "--run-id", run_id)
        assert done.returncode == 0, done.stderr
        assert f"run {run_id} finished: 18 attempts, 18 traces" in done.stdout
        return run_id

    def gate(self, candidate: str, baseline: str, out: Path) -> dict[str, Any]:
        """The gate's JSON verdict, with its terminal table under "table"; the Markdown,
        JUnit and HTML reports are written beside it."""
        gated = self.cli("gate", SUITE, "--candidate", candidate, "--baseline", baseline,
                         "--output", str(out / f"{candidate}.json"),
                         "--output", str(out / f"{candidate}.md"),
                         "--output", str(out / f"{candidate}.xml"),
                         "--output", str(out / f"{candidate}.html"))  # fmt: skip
        verdict = json.loads((out / f"{candidate}.json").read_text())
        assert gated.returncode == (0 if verdict["passed"] else 1), gated.stderr
        return {**verdict, "table": gated.stdout}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("harness")
    process, _, http_port = start_stack(data_dir)  # no --capture-* flag: default privacy
    stack = Stack(process, data_dir, http_port)
    imported = stack.cli("dataset", "import", "golden/support-seeded",
                         str(EXAMPLE / "golden.jsonl"), "--publish")  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    yield stack
    assert process.terminate() == 0, process.output


@pytest.fixture(scope="module")
def baseline(stack: Stack) -> str:
    return stack.evaluate("run-h-healthy", "--agent", f"{EXAMPLE / 'agent.py'}:healthy")


def rows(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["metric"]: row for row in verdict["rows"] if row["slice"] is None}


def failed_metrics(verdict: dict[str, Any]) -> set[str]:
    return {metric for metric, row in rows(verdict).items() if not row["passed"]}


def case(verdict: dict[str, Any], item: str) -> dict[str, Any]:
    return next(c for c in verdict["cases"] if c["item_id"] == item)


def test_the_healthy_build_passes_its_own_gate(stack: Stack, baseline: str, tmp_path: Path) -> None:
    spans, stored = stack.process.sql(
        "SELECT count(), countIf(GenAIToolArguments != '' OR GenAIOutputMessages != '') "
        f"FROM spans WHERE TraceId IN (SELECT TraceId FROM spans WHERE EvalRunId = '{baseline}')"
    ).rows[0]
    assert spans > 0 and stored == 0  # default privacy: the verdicts come from the facts
    verdict = stack.gate(baseline, baseline, tmp_path)
    assert verdict["passed"], [r["reason"] for r in verdict["rows"] if not r["passed"]]
    assert rows(verdict)["sound"]["threshold_from"] == "risk tier high"  # listed, from the tier


def test_an_unrequested_ticket_fails_sound_and_pg110_with_a_diff_of_the_extra_call(
    stack: Stack, baseline: str, tmp_path: Path
) -> None:
    candidate = stack.evaluate("run-h-ticket", "--agent", f"{EXAMPLE / 'agent.py'}:eager_ticket")
    verdict = stack.gate(candidate, baseline, tmp_path)
    assert failed_metrics(verdict) == CATCHING_METRICS["eager_ticket"]  # sound, PG110, path
    order = case(verdict, "order-1")
    assert order["flip"] == "regressed" and order["candidate"]["metrics"]["PG110"]["passed"] == 0
    assert any("Write open_ticket on a 'read' turn" in f for f in order["candidate"]["failures"])
    assert [line["op"] for line in order["diff"]["lines"]] == ["same", "actual"]
    assert order["diff"]["lines"][1]["call"] == "open_ticket(?)"  # its arguments were dropped
    markdown = (tmp_path / f"{candidate}.md").read_text()
    assert "```diff\n  lookup_order(?)\n+ open_ticket(?)\n```" in markdown
    html = (tmp_path / f"{candidate}.html").read_text()
    assert '<span class="diff-actual">+ open_ticket(?)</span>' in html
    suites = ET.parse(tmp_path / f"{candidate}.xml").getroot().findall("testsuite")
    assert [s.get("failures") for s in suites][1] == "3"  # the three order-status cases


def test_a_guard_that_refuses_an_out_of_bounds_plan_is_sound_but_not_goal_completed(
    stack: Stack, baseline: str, tmp_path: Path
) -> None:
    """The build runs behind HTTP; the oracle reads its sandbox from its state endpoint."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "serve.py"), "plan_guard", "--port", str(port),
         "--otlp", f"http://127.0.0.1:{stack.http_port}"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and "serving plan_guard" in server.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        candidate = stack.evaluate(
            "run-h-guard", "--agent", f"{url}/turn", "--agent-state", f"{url}/state"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
    verdict = stack.gate(candidate, baseline, tmp_path)
    assert failed_metrics(verdict) == CATCHING_METRICS["plan_guard"]  # goal_completed, ...
    assert rows(verdict)["sound"]["candidate_mean"] == 1.0  # ... but not sound
    plan = case(verdict, "plan-1")
    assert plan["flip"] == "regressed"
    assert (
        "repeat 0: goal_completed: End state: account.plan is 'basic', expected 'premium'."
        in (plan["candidate"]["failures"])
    )
    assert plan["candidate"]["metrics"]["sound"] == {"passed": 2, "attempts": 2, "undecided": 0}
    refund = case(verdict, "refund-1")  # the same oracle passes where the writes happened
    assert refund["candidate"]["metrics"]["goal_completed"]["passed"] == 2


def test_a_five_digit_reference_fails_its_regex_check(
    stack: Stack, baseline: str, tmp_path: Path
) -> None:
    candidate = stack.evaluate(
        "run-h-placeholder", "--agent", f"{EXAMPLE / 'agent.py'}:placeholder_reference"
    )
    verdict = stack.gate(candidate, baseline, tmp_path)
    assert failed_metrics(verdict) == CATCHING_METRICS["placeholder_reference"]  # checks
    for item in ("refund-1", "refund-2"):
        refund = case(verdict, item)
        assert refund["flip"] == "regressed"
        assert refund["candidate"]["metrics"]["check.answer_regex"]["passed"] == 0
    assert "regressed: refund-1, refund-2" in verdict["table"]
    assert (
        r"check.answer_regex: The final answer has no match of /\bORD-\d{6}\b/."
        in (verdict["table"])
    )
