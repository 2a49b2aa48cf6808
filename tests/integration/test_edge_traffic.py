"""EDGE on production traffic, end to end: the car-dealer LangGraph agent under each REAL
LangChain instrumentation (OpenLLMetry, OpenInference; a scripted fake chat model from
langchain-core, no network) sends its traces through a `pathgrade up` stack (Tansu + chDB)
whose policy names the graph per service. `edge infer` writes the graph LangGraph itself
exports; a turn forced through a missing edge raises PG118; `edge traffic` reports
coverage per graph."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pathgrade.content.graph_documents import from_langgraph_json

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.graphs import structure
from tests.support.paths import REPO_ROOT

pytestmark = pytest.mark.integration

INSTRUMENTATIONS = ["openllmetry", "openinference"]
TRAFFIC = ["book a test drive", "ask about the warranty", "ask a frequently asked question",
           "hello there", "book a test drive please"]  # fmt: skip
FORCED = "book a test drive and force the warranty"


def service(instrumentation: str) -> str:
    return f"dealer-{instrumentation}"


def export_langgraph(path: Path) -> dict:
    """What LangGraph exports for the agent (`get_graph().to_json()`), written to `path`."""
    done = subprocess.run(
        [sys.executable, "-m", "examples.car_dealer.instrumented", "--export", str(path)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(path.read_text())


class Stack:
    def __init__(
        self, process: PathgradeProcess, http_port: int, policy: Path, langgraph: dict
    ) -> None:
        self.process = process
        self.http_port = http_port
        self.policy = policy
        self.langgraph = langgraph

    def send(self, instrumentation: str, *messages: str) -> None:
        """The agent, under `instrumentation`, answers `messages` (one turn each) and exports
        its spans to the stack; waits until the store holds them."""
        before = self.turns(instrumentation)
        done = subprocess.run(
            [sys.executable, "-m", "examples.car_dealer.instrumented", "--instrumentation",
             instrumentation, "--otlp", f"http://127.0.0.1:{self.http_port}", "--service",
             service(instrumentation), *messages],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_until(lambda: self.turns(instrumentation) == before + len(messages), timeout_s=60)

    def turns(self, instrumentation: str) -> int:
        return self.process.scalar(
            "SELECT uniqExact(TraceId) FROM spans FINAL WHERE ParentSpanId = '' "
            f"AND ServiceName = '{service(instrumentation)}'"
        )

    def codes(self, instrumentation: str) -> set[str]:
        """The codes of every alert raised on the instrumentation's service."""
        rows = self.process.sql(
            f"SELECT DISTINCT Code FROM alerts FINAL WHERE Service = '{service(instrumentation)}'"
        ).rows
        return {code for (code,) in rows}

    def pg118(self, instrumentation: str) -> list[list]:
        return self.process.sql(
            "SELECT Details, DetectedAtNs - TraceEndNs FROM alerts FINAL WHERE Code = 'PG118' "
            f"AND Service = '{service(instrumentation)}'"
        ).rows

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert self.process.data_dir is not None
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir",
             str(self.process.data_dir)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("edge-traffic")
    policy_dir = tmp_path_factory.mktemp("policy")
    (policy_dir / "graphs").mkdir()
    langgraph = export_langgraph(policy_dir / "graphs" / "car-dealer.json")
    policy = policy_dir / "policy.yaml"
    policy.write_text(
        "version: 1\nservices:\n"
        + "".join(
            f"  {service(name)}:\n    agent_graph: {{graph: graphs/car-dealer.json}}\n"
            for name in INSTRUMENTATIONS
        )
    )
    process, _, http_port = start_stack(data_dir, "--policy", str(policy))
    yield Stack(process, http_port, policy, langgraph)
    assert process.terminate() == 0, process.output


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_inferred_graph_is_langgraphs_and_a_forced_turn_raises_pg118(
    stack: Stack, instrumentation: str, tmp_path: Path
) -> None:
    stack.send(instrumentation, *TRAFFIC)
    out = tmp_path / "inferred.json"
    inferred = stack.cli("edge", "infer", "--where", f"ServiceName = '{service(instrumentation)}'",
                         "--since", "1h", "--out", str(out))  # fmt: skip
    assert inferred.returncode == 0, inferred.stderr
    assert f"graph of {len(TRAFFIC)} traces" in inferred.stdout
    graph = json.loads(out.read_text())
    declared = "declared" if instrumentation == "openllmetry" else "observed"
    assert graph["inferred_from"]["structure"] == declared  # gen_ai.workflow.* on OpenLLMetry
    assert structure(graph) == structure(from_langgraph_json(stack.langgraph).to_dsl())
    nodes = {node["id"]: node for node in graph["nodes"]}
    assert nodes["test_drive"]["visits"] == 2 and nodes["greetings"]["visits"] == len(TRAFFIC)
    assert stack.pg118(instrumentation) == []  # every turn so far stayed on the graph
    # each turn is complete: its agent span is the graph's root (under OpenInference a
    # CHAIN span the convention mapping reads as LangGraph's), the model reports tokens
    assert "PG100" not in stack.codes(instrumentation)

    stack.send(instrumentation, FORCED)
    (details, delay_ns), *_ = wait_until(lambda: stack.pg118(instrumentation), timeout_s=60)
    print(f"{instrumentation}: PG118 raised {delay_ns / 1e9:.2f} s after the forced turn ended")
    finding = json.loads(details)
    assert (finding["problem"], finding["from"], finding["node"]) == (
        "missing_edge", "test_drive", "warranty")  # fmt: skip
    assert finding["path"] == ["greetings", "test_drive", "warranty"]
    assert "PG100" not in stack.codes(instrumentation)


def test_traffic_report_shows_coverage_per_graph(stack: Stack, tmp_path: Path) -> None:
    for instrumentation in INSTRUMENTATIONS:
        if stack.turns(instrumentation) == 0:
            stack.send(instrumentation, *TRAFFIC, FORCED)
    report = tmp_path / "traffic.html"
    done = stack.cli("edge", "traffic", "--policy", str(stack.policy), "--since", "1h",
                     "--out", str(report))  # fmt: skip
    assert done.returncode == 0, done.stderr
    for instrumentation in INSTRUMENTATIONS:
        line = next(x for x in done.stdout.splitlines() if service(instrumentation) in x)
        assert "coverage 1.000 of nodes, 1.000 of edges" in line, line
        assert "1 walks off the graph" in line, line
    html = report.read_text()
    assert all(f"service {service(i)}" in html for i in INSTRUMENTATIONS)
    assert "nodes covered" in html and "missing_edge 1" in html
    # one LangGraph agent hands off to no other agent: each written graph is the plain one
    pictures = [report.with_name(f"traffic-service_{service(i)}.svg") for i in INSTRUMENTATIONS]
    assert all(p.read_text() in html for p in pictures)
    assert not any("handoff" in p.read_text() for p in pictures) and "Hand-offs" not in html
    graph = stack.policy.parent / "graphs" / "car-dealer.json"
    where = f"ServiceName = '{service('openinference')}'"
    advice = stack.cli("edge", "recommend", "--graph", str(graph), "--path", "greetings",
                       "--since", "1h", "--where", where, "--format", "json")  # fmt: skip
    assert advice.returncode == 0, advice.stderr
    after = {c["node"]: c["traversals"] for c in json.loads(advice.stdout)["next"]}
    assert after == {"test_drive": 3, "warranty": 1, "faq": 1}  # TRAFFIC + FORCED, by hand
