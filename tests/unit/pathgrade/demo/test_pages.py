"""The demo's pages: the banner names every page of the UI, the seeding finds the examples
and the EDGE example it can run, and a directory seeded before is not seeded again (the
seeding itself runs in tests/integration/test_demo_pages.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pathgrade.batch_plane.store.demo_rows import DemoProgress
from pathgrade.schemas.demo_marks import DEMO_OWNER
from pathgrade.schemas.store import QueryResult

from pathgrade.demo import pages
from pathgrade.demo.pages import (
    DemoSite,
    PageSeeder,
    SeedingStopped,
    banner,
    edge_example,
    ended,
    examples_dir,
)
from pathgrade.web.rendering import NAVIGATION
from tests.support.paths import REPO_ROOT


def test_the_banner_names_every_page_of_the_browser_ui() -> None:
    lines = banner("http://127.0.0.1:8000", Path("/data"))
    for href, _label in NAVIGATION:
        assert any(f"http://127.0.0.1:8000{href} " in line for line in lines), href
    assert any("pathgrade demo clean --data-dir /data" in line for line in lines)


def test_the_examples_are_found_beside_the_source_tree() -> None:
    assert examples_dir() == REPO_ROOT / "examples"


def test_the_edge_run_is_the_car_dealer_with_langgraph_else_the_recruitment_graph(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    examples = REPO_ROOT / "examples"
    graph, agent, name = edge_example(examples)
    assert name == "car-dealer" and graph.is_file()  # the test extra installs LangGraph
    assert Path(agent.rpartition(":")[0]).is_file()
    monkeypatch.setattr(pages.importlib.util, "find_spec", lambda name: None)
    graph, agent, name = edge_example(examples)
    assert name == "recruitment" and graph.is_file()
    assert Path(agent.rpartition(":")[0]).is_file()


class Counting:
    """A store that answers every count with `count`, and records the queries."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.asked: list[tuple[str, Any]] = []

    def query(self, sql: str, parameters: Any = None, readonly: bool = False) -> QueryResult:
        self.asked.append((sql, parameters))
        return QueryResult(["n"], ["UInt64"], [[self.count]])


def test_a_directory_seeded_before_is_left_as_it_is(tmp_path: Path) -> None:
    said: list[str] = []
    store = Counting(1)
    site = DemoSite(tmp_path, "http://127.0.0.1:1", "http://ui", REPO_ROOT / "examples")
    PageSeeder(site, DemoProgress(store), threading.Event(), said.append).run()
    assert store.asked == [(store.asked[0][0], {"owner": DEMO_OWNER})]
    assert said == [
        "demo: this directory holds the demo's pages from an earlier run "
        f"(pathgrade demo clean --data-dir {tmp_path} deletes them)"
    ]
    assert not (tmp_path / "demo").exists()


def test_a_stop_before_the_first_alert_ends_the_seeding_without_a_command(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    stop = threading.Event()
    stop.set()
    site = DemoSite(tmp_path, "http://127.0.0.1:1", "http://ui", REPO_ROOT / "examples")
    PageSeeder(site, DemoProgress(Counting(0)), stop, said.append).run()
    assert said == []
    assert not (tmp_path / "demo" / "seed.log").exists()  # no command ran


def test_a_stop_ends_the_command_running() -> None:
    stop = threading.Event()
    running = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    threading.Timer(0.5, stop.set).start()
    with pytest.raises(SeedingStopped):
        ended(running, stop)
    assert running.poll() is not None  # ended, not left behind
