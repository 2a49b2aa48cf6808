"""The EDGE run page of a multi-agent run, in a real Chromium (Debian's, through
Playwright) against a real `pathgrade up` on default settings: `pathgrade edge run` drives
a three-agent desk (tests/integration/handoffs/edge_agent.py: triage calls lookup as a
sub-agent, then transfers control to billing) through the collector, and the page draws
each agent as a node and each hand-off as an edge marked with its kind.

The screenshot goes to $PATHGRADE_SCREENSHOTS/edge-handoffs.png when set, else to the
test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.handoffs import edge_agent
from tests.support.browser import chromium

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RUN_ID = "edge-desk"
AGENT = f"{Path(edge_agent.__file__)}:respond"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PathgradeProcess, str, int]]:
    """A stack on default settings holding the desk's EDGE run, the UI's address and the
    run's agent turns."""
    data_dir = tmp_path_factory.mktemp("edge-handoffs")
    process, _, http_port = start_stack(data_dir)
    try:
        graph = data_dir.parent / "desk-graph.json"
        graph.write_text(json.dumps(edge_agent.GRAPH))
        done = subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", "edge", "run", str(graph), "--agent", AGENT,
             "--otlp", f"http://127.0.0.1:{http_port}", "--run-id", RUN_ID, "--replays", "2",
             "--variants", "1"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        turns = int(re.search(r"(\d+) agent turns", done.stdout)[1])
        wait_until(
            lambda: (
                process.scalar(
                    "SELECT count() FROM spans FINAL WHERE ParentSpanId = '' "
                    f"AND EvalRunId = '{RUN_ID}' AND SpanName != 'pathgrade.edge.run'"
                )
                == turns
            ),
            timeout_s=60,
        )
        ui = json.loads((data_dir / "stack.json").read_text())["ui_url"]
        yield process, ui, turns
    finally:
        assert process.terminate() == 0, process.output


def test_the_edge_page_draws_the_agents_and_marks_transfer_and_sub_agent_call(
    stack: tuple[PathgradeProcess, str, int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, ui, turns = stack
    shots = Path(os.environ.get("PATHGRADE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else 0)
        page.on("pageerror", lambda e: errors.append(str(e)))
        response = page.goto(f"{ui}/edge/{RUN_ID}")
        page.wait_for_load_state("networkidle")
        assert response is not None and response.status == 200
        graph = page.locator("#edge-graph svg")
        nodes = graph.locator("circle.node").evaluate_all("c => c.map(n => n.dataset.node)")
        assert sorted(nodes) == sorted(edge_agent.NODES)
        edges = graph.locator("path.edge").evaluate_all(
            "p => p.map(e => [e.dataset.edge, e.dataset.handoff || ''])"
        )
        assert sorted(edges) == [
            ["lookup -> billing", ""],  # a transition of the walk, no hand-off
            ["triage -> billing", "transfer"],  # control passed: not a graph edge, drawn
            ["triage -> lookup", "delegation"],  # the sub-agent call
        ]
        styles = {
            kind: graph.locator(f"path.handoff[data-handoff={kind}]").evaluate(
                "e => [getComputedStyle(e).stroke, e.getAttribute('stroke-dasharray') || '']"
            )
            for kind in ("transfer", "delegation")
        }
        assert styles["transfer"][0] != styles["delegation"][0]
        assert (styles["transfer"][1], bool(styles["delegation"][1])) == ("", True)
        assert graph.locator(".handoff-legend").count() == 1
        rows = page.locator("#handoff-table tr.handoff").evaluate_all(
            "r => r.map(t => [...t.cells].map(c => c.textContent))"
        )
        every = str(turns)  # each turn calls lookup once and transfers to billing once
        assert rows == [
            ["triage", "lookup", "delegation", every, every],
            ["triage", "billing", "transfer", every, every],
        ]
        page.screenshot(path=str(shots / "edge-handoffs.png"), full_page=False)
        x, y = page.locator("path.handoff[data-handoff=delegation]").evaluate(
            "e => { const p = e.getPointAtLength(e.getTotalLength() / 2)"
            ".matrixTransform(e.getScreenCTM()); return [p.x, p.y]; }"
        )  # the middle of the curve: its box's centre is off the stroke
        page.mouse.move(x, y)
        info = page.locator("#graph-info").inner_text()
        assert info.startswith("triage -> lookup: ") and "delegation" in info, info
        assert edge_agent.CUSTOMER not in page.content()
        assert errors == []
        context.close()
