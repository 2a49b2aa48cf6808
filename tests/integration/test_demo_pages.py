"""A fresh `pathgrade up --demo`, on default settings, fills every page of the browser UI:
a real Chromium (Debian's, driven by Playwright) crawls the UI from `/` once the demo says
every page is populated and the first status is taken, and finds each kind of page
populated (trace, conversation, alert, run, gate, dataset, EDGE run, review item, health)
with no console error on any page it opened. `pathgrade demo clean` then deletes what the
demo made, and nothing else.

Screenshots of each kind of page go to $PATHGRADE_SCREENSHOTS/demo (docs/screenshots when
refreshing the committed set), else to the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from playwright.sync_api import Browser, Page

from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.browser import chromium

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

POPULATED_LINE = "demo: every page is populated"
KINDS = {
    "traces": r"/traces", "trace": r"/trace/[0-9a-f]{32}", "conversation": r"/conversation/.+",
    "alerts": r"/alerts", "detectors": r"/detectors", "runs": r"/runs", "gate": r"/gates/.+",
    "compare": r"/compare", "datasets": r"/datasets", "dataset": r"/dataset",
    "dataset-item": r"/dataset-item/.+", "edge-runs": r"/edge", "edge-run": r"/edge/[^/]+",
    "edge-node": r"/edge/[^/]+/node/.+", "review": r"/review", "health": r"/health",
}  # fmt: skip
"""Each kind of page the UI serves, by its path."""
VISITS_PER_KIND = 4  # the crawl opens at most this many pages of a kind


def _populated_gate(page: Page) -> bool:
    """The seeded defect's gate: FAIL on reference_match alone, with its interval and the
    cases that flipped."""
    failed = page.locator("tr.gate-row.failed").evaluate_all(
        "rows => rows.map(r => r.dataset.metric)"
    )
    return (
        page.locator("#gate-verdict").inner_text() == "FAIL"
        and set(failed) == {"reference_match"}
        and "[-" in page.locator("tr.gate-row.failed").first.inner_text()  # its interval
        and page.locator("#gate-cases tr.case.regressed").count() > 0
    )


POPULATED: dict[str, Callable[[Page], bool]] = {
    "trace": lambda page: page.locator("a.wf-row").count() >= 2,
    "conversation": lambda page: page.locator("li.turn").count() >= 1,
    "alerts": lambda page: page.locator("#alert-table a[href^='/trace/']").count() >= 1,
    "runs": lambda page: page.locator("#run-table a[href]").count() >= 2,
    "gate": _populated_gate,
    "datasets": lambda page: all(
        page.locator(f"main a:has-text('{name}')").count()
        for name in ("golden/support-seeded", "regression/support-demo")
    ),
    "dataset": lambda page: page.locator("#item-table tr a[href]").count() >= 1,
    "edge-run": lambda page: (
        page.locator("#edge-graph circle.node").count() >= 2
        and page.locator("#determinism-table").count() == 1
    ),
    "review": lambda page: page.locator("#review-queue a[href^='/trace/']").count() >= 1,
    "health": lambda page: (
        page.locator("#status-line").count() == 1 and page.locator("section.process").count() >= 3
    ),
}
"""What makes each kind of page populated (the kinds the demo must fill)."""
SHOWCASE: dict[str, Callable[[Page], bool]] = {
    "trace": lambda page: page.locator("a.wf-row.flagged").count() >= 1,
}
"""The page of a kind the screenshot prefers (a trace with a finding), when the crawl opens one."""


@dataclass
class Crawl:
    """What a crawl from `/` opened: per kind, the pages and whether each was populated;
    console errors and non-200 answers by page."""

    opened: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PathgradeProcess]:
    """A fresh `pathgrade up --demo` on default settings, once it said every page is
    populated and took its first status."""
    began = time.monotonic()
    process, _, _ = start_stack(tmp_path_factory.mktemp("demo"), "--demo")
    try:
        wait_until(
            lambda: process.output_has(POPULATED_LINE) or _failed_line(process),
            timeout_s=300,
        )
        assert not _failed_line(process), process.output
        print(f"every page populated {time.monotonic() - began:.0f} s after `up --demo` began")
        wait_until(lambda: process.output_has("status: in "), timeout_s=120)
        yield process
    finally:
        assert process.terminate() == 0, process.output


def _failed_line(process: PathgradeProcess) -> bool:
    return any(line.startswith("demo: ") and "failed" in line for line in process.lines)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def crawl(browser: Browser, ui: str, shots: Path) -> Crawl:
    """Open `/` and every same-site page linked from what was opened, up to
    VISITS_PER_KIND pages of each kind; a screenshot of each kind's first populated page
    (its first SHOWCASE page, where the kind has one)."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    found = Crawl()
    opening = [""]  # the page being opened, for the errors it logs

    def logged(text: str) -> None:
        found.errors.setdefault(opening[0], []).append(text)

    page.on("console", lambda m: logged(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: logged(str(e)))
    shot: dict[str, bool] = {}  # kind -> whether its screenshot is a showcase page
    queue, queued = ["/"], Counter[str]()
    seen = {"/"}
    while queue:
        opening[0] = path = queue.pop(0)
        response = page.goto(ui + path)
        page.wait_for_load_state("networkidle")
        if response is None or response.status != 200:
            found.refused[path] = response.status if response else 0
            continue
        kind = _kind(urlsplit(page.url).path)  # `/` lands on the trace list
        if kind is not None:
            populated = POPULATED.get(kind, lambda _: True)(page)
            showcase = populated and SHOWCASE.get(kind, lambda _: True)(page)
            if populated and not shot.get(kind) and (showcase or kind not in shot):
                page.screenshot(path=str(shots / f"{kind}.png"), full_page=False)
                shot[kind] = showcase
            found.opened.setdefault(kind, []).append((path, populated))
        for href in page.locator("a[href]").evaluate_all("links => links.map(a => a.href)"):
            link = _same_site(ui, page.url, href)
            target = _kind(urlsplit(link).path) if link else None
            if link and target and link not in seen and queued[target] < VISITS_PER_KIND:
                seen.add(link)
                queued[target] += 1
                queue.append(link)
    context.close()
    return found


def _kind(path: str) -> str | None:
    return next((kind for kind, pattern in KINDS.items() if re.fullmatch(pattern, path)), None)


def _same_site(ui: str, here: str, href: str) -> str | None:
    """The path and query of a link on the UI's own site, None for any other."""
    target = urlsplit(urljoin(here, href))
    if f"{target.scheme}://{target.netloc}" != ui.rstrip("/"):
        return None
    return target.path + (f"?{target.query}" if target.query else "")


def test_a_crawl_from_the_root_finds_every_kind_of_page_populated(
    demo: PathgradeProcess, browser: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert demo.data_dir is not None
    ui = _state(demo)["ui_url"]
    screenshots = os.environ.get("PATHGRADE_SCREENSHOTS")
    shots = Path(screenshots) / "demo" if screenshots else tmp_path_factory.mktemp("shots")
    shots.mkdir(parents=True, exist_ok=True)
    found = crawl(browser, ui, shots)
    empty = {kind for kind in POPULATED if not any(ok for _, ok in found.opened.get(kind, []))}
    assert empty == set(), {kind: found.opened.get(kind) for kind in empty}
    assert found.errors == {}
    assert found.refused == {}
    assert len(found.opened) >= len(POPULATED)


def test_demo_clean_deletes_the_demos_data_and_keeps_the_users(
    demo: PathgradeProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With the stack running, clean refuses (the stack owns the store); once it stopped,
    clean leaves no demo row, but a dataset of the user's own and its items stay."""
    data_dir = demo.data_dir
    assert data_dir is not None
    own = tmp_path_factory.mktemp("own") / "own.jsonl"
    own.write_text('{"item_id": "mine", "input": "hello"}\n')
    imported = _pathgrade(data_dir, "dataset", "import", "golden/mine", str(own), "--publish")
    assert imported.returncode == 0, imported.stderr
    refused = _pathgrade(data_dir, "demo", "clean")
    assert refused.returncode == 2 and "stop it" in refused.stderr
    assert demo.terminate() == 0, demo.output
    counted = _pathgrade(data_dir, "demo", "clean", "--dry-run")
    assert counted.returncode == 0, counted.stderr
    for table in ("spans", "alerts", "scores", "runs", "gates", "datasets", "dataset_items"):
        assert re.search(rf"\b{table} [1-9]", counted.stdout), counted.stdout
    cleaned = _pathgrade(data_dir, "demo", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (data_dir / "demo").exists()
    assert _pathgrade(data_dir, "demo", "clean", "--dry-run").stdout.startswith("demo rows: none")
    listed = _pathgrade(data_dir, "dataset", "list")
    assert "golden/mine" in listed.stdout and "support-seeded" not in listed.stdout
    left = _pathgrade(data_dir, "sql", "--format", "json", "SELECT count() AS n FROM spans")
    assert left.returncode == 0 and int(json.loads(left.stdout)["n"]) == 0  # all were the demo's


def _pathgrade(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _state(process: PathgradeProcess) -> dict:
    assert process.data_dir is not None
    return json.loads((process.data_dir / "stack.json").read_text())
