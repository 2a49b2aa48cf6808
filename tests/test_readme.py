"""The README fits on a page: at most 150 lines and 12,000 bytes, exactly two set-up
commands, links that resolve, an index of every docs page, and failure stories that name
the detectors as the registry does."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

from markdown_it import MarkdownIt
from mdit_py_plugins.anchors.index import slugify
from pathgrade.detectors import REGISTRY

from tests.support.paths import REPO_ROOT

README = REPO_ROOT / "README.md"
MAX_LINES, MAX_BYTES = 150, 12_000


def section(text: str, heading: str) -> str:
    """The text under the `## heading` of `text`, up to the next `## `."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings, as the docs site makes them."""
    tokens = MarkdownIt().parse(page.read_text(encoding="utf-8"))
    inline = (after for before, after in pairwise(tokens) if before.type == "heading_open")
    return {slugify(token.content) for token in inline}


def test_the_readme_fits_on_a_page() -> None:
    data = README.read_bytes()
    assert len(data.decode("utf-8").splitlines()) <= MAX_LINES
    assert len(data) <= MAX_BYTES


def test_the_readme_has_exactly_two_setup_commands() -> None:
    blocks = re.findall(
        r"^```\n(.*?)\n```$",
        section(README.read_text(), "Try it (two commands on a fresh machine)"),
        re.M | re.S,
    )
    assert len(blocks) == 2 and all("\n" not in block for block in blocks)
    assert blocks[0] == "pip install -e . && pathgrade up --demo"
    assert blocks[1].endswith("pip install -e '.[test]' && pytest")


def test_the_readmes_links_and_anchors_resolve() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO_ROOT / path
        assert target.is_file(), link
        assert not anchor or anchor in anchors(target), link


def test_the_readme_indexes_every_docs_page() -> None:
    linked = set(
        re.findall(r"\]\(docs/([\w-]+)\.md\)", section(README.read_text(), "Documentation"))
    )
    pages = {page.stem for page in (REPO_ROOT / "docs").glob("*.md")} - {"index"}
    assert pages - linked == set()


def test_the_failure_stories_name_each_detector_as_the_registry_does() -> None:
    rows = re.findall(r"^\| .* \| (PG\d{3}) `([\w-]+)` \|$", README.read_text(), re.M)
    assert len(rows) == 7 and len({code for code, _ in rows}) == 7
    assert [(code, REGISTRY[code].name) for code, _ in rows] == rows
