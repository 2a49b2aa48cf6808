"""`pathgrade ui`, the UI's production box, on a store it does not own: it starts on a
ClickHouse DSN (here an embedded chDB directory that `pathgrade migrate` created), serves
the pages from it, and refuses a store it cannot reach with a clear error. (It once
crashed on start: the store's client gained a reader session the command did not open.)"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from pathgrade.stack.broker import free_port
from tests.integration.conftest import PathgradeProcess

pytestmark = pytest.mark.integration


def test_the_ui_box_serves_the_pages_of_a_migrated_store(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    migrated = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "migrate", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    port = free_port()
    ui = PathgradeProcess(
        ["ui", "--clickhouse", f"chdb://{data_dir}/clickhouse", "--listen", f"127.0.0.1:{port}"],
        ready_text="pathgrade ui:",
    )  # fmt: skip
    try:
        for path in ("/traces", "/alerts", "/health"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as page:
                assert page.status == 200
                assert re.search(r"<title>[^<]+</title>", page.read().decode())
    finally:
        # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal
        assert ui.terminate() in (0, -signal.SIGTERM), ui.output


def test_an_unreachable_store_is_a_clear_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "ui", "--clickhouse",
         f"http://127.0.0.1:{free_port()}/db", "--listen", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "cannot reach ClickHouse at" in done.stderr, done.stderr
