"""The browser the UI tests drive: Debian's Chromium (/usr/bin/chromium) through
Playwright, headless; Playwright never downloads a browser here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@contextmanager
def chromium() -> Iterator[Browser]:
    """A launched Chromium, closed after the block."""
    assert CHROMIUM.exists(), (
        "the browser tests need Debian's Chromium at /usr/bin/chromium: "
        "apt-get install -y chromium (the README's test command does)"
    )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()
