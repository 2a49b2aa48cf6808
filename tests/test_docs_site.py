"""docs/ builds as a site (Sphinx with MyST Markdown, conf.py at the repository's root) in
strict mode: a broken link or anchor fails the build, every page is in the navigation
(those docs/index.md does not list too) and in the search index."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`sphinx-build` of `source` into `out` with the repository's conf.py, warnings as
    errors (all of them reported), nothing written into the repository."""
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(REPO_ROOT), "-W"]
    command += ["--keep-going", "-n", "-q", "-E", str(source), str(out)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def navigation(page: Path) -> set[str]:
    """The pages the sidebar's navigation of a built page links to."""
    html = page.read_text(encoding="utf-8")
    sidebar = html[html.index('class="sphinxsidebar"') :]
    return set(re.findall(r'href="([\w-]+)\.html"', sidebar))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(DOCS, out)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    return out


def test_every_page_is_built_and_in_the_navigation(site: Path) -> None:
    pages = {page.stem for page in DOCS.glob("*.md")}
    assert pages <= {page.stem for page in site.glob("*.html")}
    assert pages - {"index"} <= navigation(site / "index.html")


def test_the_site_has_a_search_index(site: Path) -> None:
    assert (site / "search.html").is_file()
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    assert '"pg117"' in index.lower() and '"idempot' in index.lower()


def test_a_broken_link_or_anchor_fails_the_build_and_an_unlisted_page_is_navigable(
    tmp_path: Path,
) -> None:
    source = tmp_path / "docs"
    shutil.copytree(DOCS, source)
    (source / "zz-unlisted.md").write_text(
        "# A page index.md does not list\n\n"
        "[a heading gate.md lacks](gate.md#no-such-heading), [a page](no-such-page.md)\n",
        encoding="utf-8",
    )
    result = build(source, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-heading" in result.stderr and "no-such-page.md" in result.stderr
    assert "zz-unlisted" in navigation(tmp_path / "site" / "gate.html")
