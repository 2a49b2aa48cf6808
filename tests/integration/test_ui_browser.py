"""The browser UI in a real Chromium (Debian's, driven by Playwright) against one real
`pathgrade up` with demo traffic, two tenants, an eval run of the seeded-defects suite with
its gate, and an EDGE run; every page test shares that stack.

Screenshots of every page go to $PATHGRADE_SCREENSHOTS (docs/screenshots when refreshing
the committed set), else to the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from playwright.sync_api import Browser, Page

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.browser import chromium

# The module fixture starts a stack and runs two evals and an EDGE run: its setup counts
# against the first test's timeout, which is raised from the default 300 s accordingly.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SEEDED = REPO / "examples" / "seeded_defects"
RECRUITMENT = REPO / "examples" / "recruitment"
TOKENS = {"token-acme": "acme", "token-globex": "globex"}
SHARED_TRACE = "5eed" * 8  # one trace id both tenants send
GLOBEX_ONLY_NAME = "globex-confidential-span"


@dataclass
class World:
    """The running stack and what the fixture put in it."""

    process: PathgradeProcess
    ui: str
    http_port: int
    gate_id: str
    gate_html: Path
    globex_trace: str
    edge_run: str
    shots: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return pathgrade(self.process.data_dir, *args)


def pathgrade(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`pathgrade ARGS --data-dir DATA_DIR`, through the running stack."""
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def _otlp_json(trace_id: str, span_name: str) -> bytes:
    """One root span of `trace_id` as OTLP/JSON."""
    now = 1_796_000_000_000_000_000
    span = {
        "traceId": trace_id, "spanId": "a1b2c3d4e5f60718", "name": span_name, "kind": 1,
        "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 5_000_000),
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}],
    }  # fmt: skip
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "shared-svc"}}]}
    body = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}
    return json.dumps(body).encode()


def _post(port: int, token: str, body: bytes) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces", data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    data_dir = tmp_path_factory.mktemp("ui")
    tokens = data_dir.parent / "ui-tokens.yaml"
    tokens.write_text("".join(f"{token}: {tenant}\n" for token, tenant in TOKENS.items()))
    process, _, http_port = start_stack(
        data_dir, "--demo", "--no-demo-pages", "--tokens-file", str(tokens), "--capture-tools", "*",
        "--capture-messages", "--status-every", "2",
    )  # fmt: skip
    try:
        yield _populate(process, http_port, tmp_path_factory)
    finally:
        assert process.terminate() == 0, process.output


def _populate(
    process: PathgradeProcess, http_port: int, tmp_path_factory: pytest.TempPathFactory
) -> World:
    state = json.loads((process.data_dir / "stack.json").read_text())
    otlp = f"http://127.0.0.1:{http_port}"
    exporter = OTLPSpanExporter(
        endpoint=f"{otlp}/v1/traces", headers={"authorization": "Bearer token-globex"}
    )
    globex = send_demo_traces(exporter, traces=6, seed=99).trace_ids
    _post(http_port, "token-acme", _otlp_json(SHARED_TRACE, "acme-own-span"))
    _post(http_port, "token-globex", _otlp_json(SHARED_TRACE, GLOBEX_ONLY_NAME))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return pathgrade(process.data_dir, *args)

    tenant = ("--tenant", "acme")
    done = cli("dataset", "import", "golden/support-seeded", str(SEEDED / "golden.jsonl"),
               "--publish", *tenant)  # fmt: skip
    assert done.returncode == 0, done.stderr
    for build, run_id in (("healthy", "ui-base"), ("stale_index", "ui-cand")):
        agent = f"{SEEDED / 'agent.py'}:{build}"
        done = cli("eval", str(SEEDED / "suite.yaml"), "--agent", agent, "--run-id", run_id,
                   "--token", "token-acme", "--otlp", otlp, *tenant)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    gate_html = tmp_path_factory.mktemp("gate") / "gate.html"
    gated = cli("gate", str(SEEDED / "suite.yaml"), "--candidate", "ui-cand", "--baseline",
                "ui-base", "--output", str(gate_html), *tenant)  # fmt: skip
    assert gated.returncode == 1, gated.stdout + gated.stderr
    gate_id = re.search(r"recorded as (gate-[0-9a-f]{12})", gated.stderr)[1]
    edge = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "edge", "run",
         str(RECRUITMENT / "graph_constrained.json"), "--agent",
         f"{RECRUITMENT / 'agent.py'}:constrained", "--otlp", otlp, "--token", "token-acme",
         "--run-id", "ui-edge", "--replays", "2", "--variants", "1"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert edge.returncode == 0, edge.stderr
    turns = int(re.search(r"(\d+) agent turns", edge.stdout)[1])
    # the acme viewer's pages open a PG110 alert of acme's own (the demo traffic's): a
    # PG110 of globex's six traces does not show there
    wait_until(
        lambda: process.scalar(
            "SELECT countIf(Code = 'PG110' AND Tenant = 'acme') > 0 "
            "AND countIf(Tenant = 'globex') > 0 FROM alerts"
        ),
        90,
    )
    wait_until(
        lambda: (
            process.scalar(
                "SELECT count() FROM spans FINAL WHERE EvalRunId = 'ui-edge' AND ParentSpanId = '' "
                "AND SpanName != 'pathgrade.edge.run'"
            )
            == turns
        )
    )
    shots = Path(os.environ.get("PATHGRADE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    shots.mkdir(parents=True, exist_ok=True)
    return World(
        process, state["ui_url"], http_port, gate_id, gate_html, globex[0], "ui-edge", shots
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


class Viewer:
    """One logged-in browser page, recording console errors and failed requests."""

    def __init__(self, browser: Browser, world: World, token: str) -> None:
        self.world = world
        self.context = browser.new_context(viewport={"width": 1440, "height": 900})
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else 0)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(world.ui + "/traces")  # not logged in yet: the login form
        assert "/login" in self.page.url
        self.page.fill("input[name=token]", token)
        self.page.click("button[type=submit]")
        self.page.wait_for_url("**/traces*")

    def open(self, path: str) -> Any:
        response = self.page.goto(self.world.ui + path)
        self.page.wait_for_load_state("networkidle")
        return response

    def shoot(self, name: str) -> None:
        self.page.screenshot(path=str(self.world.shots / f"{name}.png"), full_page=False)

    def close(self) -> None:
        self.context.close()


@pytest.fixture(scope="module")
def acme(browser: Browser, world: World) -> Iterator[Viewer]:
    viewer = Viewer(browser, world, "token-acme")
    yield viewer
    viewer.close()


def _first_href(viewer: Viewer, selector: str) -> str:
    href = viewer.page.locator(selector).first.get_attribute("href")
    assert href, f"no link {selector} on {viewer.page.url}"
    return href


def test_every_page_renders_without_console_errors(acme: Viewer, world: World) -> None:
    acme.open("/alerts?from=1h&code=PG110")
    alert_trace = _first_href(acme, "#alert-table a[href^='/trace/']")
    # the demo goes on: an alert (~1 s after its turn) may be listed before the store writer
    # wrote its trace's spans (every ~2 s); this test is about pages, not that race
    trace_id = alert_trace.split("/trace/", 1)[1][:32]
    wait_until(
        lambda: world.process.scalar(f"SELECT count() FROM spans WHERE TraceId = '{trace_id}'")
    )
    acme.open(alert_trace)
    conversation = _first_href(acme, "#conversation-link")
    acme.open("/edge/" + world.edge_run)
    node = _first_href(acme, "#node-table a")
    pages = {
        "traces": "/traces?from=1h",
        "trace": alert_trace,
        "conversation": conversation,
        "alerts": "/alerts?from=1h",
        "detectors": "/detectors",
        "runs": "/runs",
        "gate": f"/gates/{world.gate_id}",
        "compare": "/compare?candidate=ui-cand&baseline=ui-base",
        "datasets": "/datasets",
        "dataset": "/dataset?name=golden/support-seeded&version=1",
        "dataset-item": "/dataset-item/refund-1",
        "edge-runs": "/edge",
        "edge-run": f"/edge/{world.edge_run}",
        "edge-node": node,
        "review": "/review",
        "health": "/health",
    }
    for name, path in pages.items():
        response = acme.open(path)
        assert response.status == 200, f"{path}: {response.status} {acme.page.content()[:500]}"
        assert acme.page.locator("main h1").count() == 1, path
        assert acme.errors == [], f"{path}: {acme.errors}"
        acme.shoot(name)


def test_trace_list_filters_change_the_rows(acme: Viewer) -> None:
    acme.open("/traces?from=1h")
    listed = acme.page.locator("tr.trace-row")
    assert listed.count() > 5
    unfiltered = listed.evaluate_all("rows => rows.map(r => r.dataset.trace)")
    tools_per_row = [row.locator("td.tools").inner_text() for row in listed.all()]
    facets = acme.page.locator(".facet[data-facet=tool] a").all()
    # a tool some listed trace lacks: filtering on it must leave that trace out
    by_name = {facet.locator("span").inner_text(): facet for facet in facets}
    tool = next(name for name in by_name if any(name not in t for t in tools_per_row))
    tool_facet = by_name[tool]
    tool_facet.click()
    acme.page.wait_for_load_state("networkidle")
    assert f"tool={tool}" in acme.page.url  # the URL holds the query
    rows = acme.page.locator("tr.trace-row")
    assert rows.count() > 0
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.trace)") != unfiltered
    for index in range(rows.count()):
        assert tool in rows.nth(index).locator("td.tools").inner_text()
    acme.page.fill("input[name=q]", "no span is called this")
    acme.page.click("#trace-filters button[type=submit]")
    acme.page.wait_for_load_state("networkidle")
    assert acme.page.locator("tr.trace-row").count() == 0
    assert acme.page.locator(".empty").count() == 1
    acme.open("/traces?from=1h&sort=duration&order=desc")
    durations = acme.page.locator("tr.trace-row").evaluate_all(
        "rows => rows.map(r => r.dataset.trace)"
    )
    assert len(durations) > 5
    next_page = acme.page.locator("#next-page")
    if next_page.count():  # keyset paging: the next page holds other traces
        next_page.click()
        acme.page.wait_for_load_state("networkidle")
        later = acme.page.locator("tr.trace-row").evaluate_all(
            "rows => rows.map(r => r.dataset.trace)"
        )
        assert later and not set(later) & set(durations)


def test_waterfall_bars_follow_span_durations_and_selecting_a_span_shows_it(
    acme: Viewer,
) -> None:
    acme.open("/traces?from=1h&tool=lookup_order")
    acme.open(_first_href(acme, "#trace-table a[href^='/trace/']"))
    rows = acme.page.locator("a.wf-row")
    assert rows.count() >= 3
    measured = rows.evaluate_all(
        "rows => rows.map(r => [Number(r.dataset.durationNs),"
        " r.querySelector('.bar').getBoundingClientRect().width,"
        " r.querySelector('.wf-track').getBoundingClientRect().width])"
    )
    total = max(d for d, _, _ in measured)
    for duration, width, track in measured:
        if width > 4:  # bars keep a 2 px minimum
            assert abs(width / track - duration / total) < 0.01, measured
    tool_row = acme.page.locator("a.wf-row", has_text="execute_tool lookup_order").first
    span_id = tool_row.get_attribute("data-span")
    tool_row.click()
    panel = acme.page.locator(f"#detail-{span_id}")
    assert panel.is_visible()
    assert acme.page.locator(".span-detail:visible").count() == 1
    assert "gen_ai.tool.name" in panel.inner_text() and "lookup_order" in panel.inner_text()
    assert "arguments" in panel.inner_text().lower()  # captured with --capture-tools
    assert "not captured" not in panel.inner_text()
    assert f"span={span_id}" in acme.page.url
    assert "selected" in (tool_row.get_attribute("class") or "")


def test_a_multi_agent_turn_shows_its_agents_as_lanes_joined_by_the_handoff(
    acme: Viewer, world: World
) -> None:
    """The seeded agent's double charge: the support agent delegates to the billing agent;
    each agent a lane, its run's bar where its span's bar is, the hand-off at billing's
    start, from the support lane down to the billing lane."""
    trace_id = world.process.scalar(
        "SELECT any(TraceId) FROM spans FINAL WHERE EvalRunId = 'ui-base' "
        "AND EvalDatasetItemId = 'billing-1'"
    )
    acme.open(f"/trace/{trace_id}?tenant=acme")
    lanes = acme.page.locator(".agent-lanes .lane")
    assert lanes.evaluate_all("ls => ls.map(l => l.dataset.agent)") == [
        "support-agent", "billing-agent"
    ]  # fmt: skip
    billing_run = acme.page.locator(".lane[data-agent='billing-agent'] .lane-run")
    billing_span = billing_run.get_attribute("data-span")
    bar = acme.page.locator(f"a.wf-row[data-span='{billing_span}'] .bar")
    run_box, bar_box = billing_run.bounding_box(), bar.bounding_box()
    assert run_box and bar_box and abs(run_box["x"] - bar_box["x"]) < 2  # one time axis
    assert abs(run_box["width"] - bar_box["width"]) < 2
    handoff = acme.page.locator(".lane-links a.handoff")
    assert handoff.count() == 1 and "handoff-delegation" in (handoff.get_attribute("class") or "")
    link = handoff.bounding_box()
    support = acme.page.locator(".lane[data-agent='support-agent']").bounding_box()
    billing = lanes.nth(1).bounding_box()
    assert link and support and billing
    assert abs(link["x"] - run_box["x"]) < 3  # at the receiver's start
    assert (
        link["y"] < support["y"] + support["height"] and link["y"] + link["height"] > billing["y"]
    )
    listed = acme.page.locator(".handoff-list li").inner_text()
    assert "support-agent → billing-agent" in listed and "delegation" in listed
    acme.shoot("trace-agent-lanes")
    handoff.click()
    assert acme.page.locator(f"#detail-{billing_span}").is_visible()
    assert acme.errors == []


def test_the_gate_and_runs_pages_group_metrics_by_layer(acme: Viewer, world: World) -> None:
    acme.open(f"/gates/{world.gate_id}")
    layers = acme.page.locator("#gate-rows tbody.layer")
    order = layers.evaluate_all("bs => bs.map(b => b.dataset.layer)")
    assert order == ["tool use", "hand-off", "answer", "other"]  # budgets: other
    answer = acme.page.locator("#gate-rows tbody.layer[data-layer='answer']")
    assert "FAIL" in answer.locator("tr.layer-head").inner_text()
    failed = answer.locator("tr.gate-row.failed")
    assert set(failed.evaluate_all("rs => rs.map(r => r.dataset.metric)")) == {"reference_match"}
    hand_off = acme.page.locator("#gate-rows tbody.layer[data-layer='hand-off']")
    assert hand_off.locator("tr.gate-row").first.get_attribute("data-metric") == "PG121"
    assert "PASS" in hand_off.locator("tr.layer-head").inner_text()
    acme.page.locator("#gate-rows").scroll_into_view_if_needed()
    acme.shoot("gate-by-layer")
    acme.open("/runs")
    base = acme.page.locator("#run-table tr", has_text="ui-base")
    means = base.locator(".layer-mean").evaluate_all("ms => ms.map(m => m.dataset.layer)")
    assert means == ["plan", "tool use", "hand-off", "answer", "safety"]  # no retrieval metric
    acme.open("/compare?candidate=ui-cand&baseline=ui-base")
    heads = acme.page.locator("#compare-table th.layer-head")
    shown = heads.evaluate_all("hs => hs.map(h => h.dataset.layer)")
    assert shown == ["plan", "tool use", "hand-off", "answer", "safety", "other"]
    acme.shoot("compare-by-layer")


def test_a_findings_span_is_highlighted(acme: Viewer) -> None:
    acme.open("/alerts?from=1h&code=PG110")
    link = _first_href(acme, "#alert-table a[href^='/trace/']")
    span_id = re.search(r"span=([0-9a-f]{16})", link)[1]
    acme.open(link)
    flagged = acme.page.locator("a.wf-row.flagged")
    assert flagged.count() >= 1
    assert span_id in flagged.evaluate_all("rows => rows.map(r => r.dataset.span)")
    panel = acme.page.locator(f"#detail-{span_id}")
    assert panel.is_visible() and "PG110" in panel.inner_text()
    assert "detector docs" in panel.inner_text()


def test_the_gate_page_shows_the_failing_rows_of_the_seeded_defect(
    acme: Viewer, world: World
) -> None:
    acme.open(f"/gates/{world.gate_id}")
    assert acme.page.locator("#gate-verdict").inner_text() == "FAIL"
    failed = acme.page.locator("tr.gate-row.failed")
    metrics = set(failed.evaluate_all("rows => rows.map(r => r.dataset.metric)"))
    assert metrics == {"reference_match"}  # stale_index fails task completion only
    section = acme.page.locator("section.failed-row[data-slice='(all)']")
    assert "below threshold" in section.inner_text()
    attempt = section.locator("a.attempt").first
    attempt.click()  # each item's scores lead to the trace they were scored from
    acme.page.wait_for_load_state("networkidle")
    assert "/trace/" in acme.page.url and acme.page.locator("a.wf-row").count() > 0
    report = world.gate_html.read_text()  # `pathgrade gate --output gate.html`: the same page
    assert report.startswith("<!doctype html>") and "<script" not in report
    assert 'class="gate-row failed" data-metric="reference_match"' in report
    shown = world.cli("gates", "show", world.gate_id, "--format", "html", "--tenant", "acme")
    assert shown.returncode == 0, shown.stderr
    assert 'class="gate-row failed" data-metric="reference_match"' in shown.stdout
    assert world.gate_id in shown.stdout


def test_edge_graph_shows_counts_on_hover_and_a_node_leads_to_its_conversations(
    acme: Viewer, world: World
) -> None:
    acme.open(f"/edge/{world.edge_run}")
    node = acme.page.locator("#edge-graph circle.node").first
    name = node.get_attribute("data-node")
    node.hover()
    info = acme.page.locator("#graph-info").inner_text()
    assert info.startswith(f"{name}: utility") and "queries" in info
    node.click()
    acme.page.wait_for_load_state("networkidle")
    assert acme.page.url.endswith(f"/node/{name}")
    assert acme.page.locator("#node-conversations a.turn-link").count() > 0


def test_edge_graph_draws_the_orchestrator_calling_each_node_agent_as_a_sub_agent(
    acme: Viewer, world: World
) -> None:
    """The recruitment agent runs each node as a nested `invoke_agent <node>`: the agent
    around the graph is drawn as a hollow node with a delegation edge to every node it
    called, and no transfer."""
    acme.open(f"/edge/{world.edge_run}")
    graph = acme.page.locator("#edge-graph svg")
    names = "c => c.map(n => n.dataset.node)"
    assert graph.locator("circle.node.agent").evaluate_all(names) == ["recruitment-agent"]
    nodes = set(graph.locator("circle.node:not(.agent)").evaluate_all(names))
    called = graph.locator("path.handoff").evaluate_all(
        "p => p.map(e => [e.dataset.edge, e.dataset.handoff])"
    )
    assert sorted(called) == sorted([f"recruitment-agent -> {n}", "delegation"] for n in nodes)
    rows = acme.page.locator("#handoff-table tr.handoff").evaluate_all(
        "r => r.map(t => t.dataset.kind + ' ' + t.cells[0].textContent)"
    )
    assert rows and set(rows) == {"delegation recruitment-agent"}
    assert acme.errors == []


def test_a_conversation_page_advises_the_next_turn_as_edge_recommend_does(
    acme: Viewer, world: World
) -> None:
    acme.open(f"/edge/{world.edge_run}")
    acme.open(_first_href(acme, "#node-table a"))
    acme.open(_first_href(acme, "#node-conversations a.turn-link"))
    acme.open(_first_href(acme, "#conversation-link"))
    panel = acme.page.locator("#next-turn")
    assert world.edge_run in panel.locator("a[href^='/edge/']").inner_text(), panel.inner_text()
    steps = panel.locator("tr.step-row").all()
    assert len(steps) > 1, panel.inner_text()
    graph = str(RECRUITMENT / "graph_constrained.json")
    for step in steps:  # each turn's advice is the CLI's for the path up to that turn
        shown = {
            chip.get_attribute("data-node"): float(chip.get_attribute("data-probability") or "")
            for chip in step.locator(".chip").all()
        }
        advised = world.cli("edge", "recommend", "--graph", graph, "--path",
                            step.get_attribute("data-path") or "", "--from-run", world.edge_run,
                            "--format", "json")  # fmt: skip
        assert advised.returncode == 0, advised.stderr
        expected = {c["node"]: c["probability"] for c in json.loads(advised.stdout)["next"][:3]}
        assert shown == pytest.approx(expected)
    first = {chip.get_attribute("data-node") for chip in steps[0].locator(".chip").all()}
    assert first, "the first turn of a conversation has a way out in its own run"
    acme.shoot("conversation-next-turn")


def test_a_tenant_never_sees_another_tenants_trace(browser: Browser, world: World) -> None:
    acme = Viewer(browser, world, "token-acme")
    globex = Viewer(browser, world, "token-globex")
    try:
        refused = acme.open(f"/trace/{world.globex_trace}")
        assert refused.status == 404
        assert globex.open(f"/trace/{world.globex_trace}").status == 200
        acme.open(f"/trace/{SHARED_TRACE}")
        text = acme.page.locator("main").inner_text()
        assert "acme-own-span" in text and GLOBEX_ONLY_NAME not in text
        globex.open(f"/trace/{SHARED_TRACE}?tenant=acme")  # asking for acme's: not found
        assert GLOBEX_ONLY_NAME not in globex.page.content()
        globex.open(f"/trace/{SHARED_TRACE}")
        assert GLOBEX_ONLY_NAME in globex.page.content() and "acme-own-span" not in (
            globex.page.content()
        )
        for path in ("/traces?from=1d", "/alerts?from=1d", "/runs", "/datasets", "/review"):
            acme.open(path)
            assert world.globex_trace[:12] not in acme.page.content(), path
            globex.open(path)
            assert "ui-cand" not in globex.page.content(), path  # acme's runs and gates
            assert "golden/support-seeded" not in globex.page.content(), path
    finally:
        acme.close()
        globex.close()
    anonymous = urllib.request.Request(world.ui + f"/trace/{world.globex_trace}")
    with pytest.raises(urllib.error.HTTPError) as refused_login:
        opener = urllib.request.build_opener(_NoRedirect)
        opener.open(anonymous, timeout=30)
    assert refused_login.value.code == 303 and "/login" in refused_login.value.headers["location"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_sql_and_alerts_take_a_tenant(world: World) -> None:
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        listed = world.cli("sql", "--tenant", tenant, "--format", "json",
                           "SELECT DISTINCT Tenant FROM spans")  # fmt: skip
        assert [json.loads(line)["Tenant"] for line in listed.stdout.splitlines()] == [tenant]
        alerts = world.cli("alerts", "--tenant", tenant, "--format", "json", "--limit", "500")
        tenants = {json.loads(line)["Tenant"] for line in alerts.stdout.splitlines()}
        assert tenants == {tenant}, alerts.stderr
        assert other not in tenants
