"""The documentation site: Sphinx with MyST Markdown over docs/ (this file is its config).

Build it with `sphinx-build -c . -W --keep-going -n docs DIR`; tests/test_docs_site.py
builds it that way, in strict mode, into a temporary directory.
"""

import logging

from sphinx.application import Sphinx

project = "pathgrade"
author = "pathgrade contributors"
copyright = "pathgrade contributors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"

# Every heading up to level 4 gets an anchor, so `page.md#a-heading` links resolve and a
# broken one fails the strict build.
myst_heading_anchors = 4
# Code blocks without a language (commands, output, diagrams) are shown as they are.
highlight_language = "text"

html_theme = "alabaster"
html_title = "pathgrade"
html_theme_options = {"description": "Grade the path an LLM agent took", "fixed_sidebar": True}
html_sidebars = {"**": ["about.html", "searchbox.html", "navigation.html", "relations.html"]}


def _not_an_empty_glob(record: logging.LogRecord) -> bool:
    """False for the warning that the navigation's trailing `*` matched no page: it picks
    up the pages docs/index.md does not list, and when it lists every page that is fine."""
    return getattr(record, "subtype", None) != "empty_glob"


def setup(app: Sphinx) -> None:
    """Let the navigation's `*` match nothing (Sphinx gives that warning no type, so
    `suppress_warnings` cannot name it)."""
    logging.getLogger("sphinx.sphinx.directives.other").addFilter(_not_an_empty_glob)
