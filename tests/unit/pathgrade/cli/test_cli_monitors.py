"""`pathgrade monitors list|show|rules` over a real chDB store (the command's store handed
in for the one `--data-dir` would open): the latest figures per scope, one monitor's series
with its alerts and their example traces, and the Prometheus rules of a policy's
objectives."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.monitors import MonitorTick

from pathgrade.cli import monitors
from pathgrade.cli.main import main
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

MINUTE_NS = 60 * 10**9
TRACE = "ab" * 16
SPAN = "cd" * 8


def tick(scope: str, at_ns: int, figure: float, state: str, monitor: str = "tool-errors") -> Any:
    return MonitorTick(
        tenant="acme", monitor=monitor, kind="objective", scope=scope, service="", agent="",
        tick_ns=at_ns, window_start_ns=at_ns - 5 * MINUTE_NS, window_end_ns=at_ns,
        figure=figure, threshold=5.0, current=figure / 100, baseline=0.01, items=400,
        state=state, episode="ep-1" if state == "firing" else "",
    )  # fmt: skip


@pytest.fixture(scope="module")
def seeded(store: ClientStore) -> int:
    """tool-errors over two services, billing firing at its latest tick, with its alert;
    another monitor evaluated a day ago. Returns now (ns)."""
    now = time.time_ns()
    queries = MonitorQueries(store)
    queries.write_ticks([
        tick("service=billing", now - 3 * MINUTE_NS, 2.0, "ok"),
        tick("service=billing", now - 2 * MINUTE_NS, 7.5, "firing"),
        tick("service=search", now - 2 * MINUTE_NS, 1.25, "ok"),
        tick("", now - 24 * 60 * MINUTE_NS, 1.0, "ok", monitor="latency"),
    ])  # fmt: skip
    firing = Alert(
        alert_key="k1", code="PG200", name="tool-errors", severity="high", kind="monitor",
        reason="tool-errors (service=billing): 7.5% of 400 turns had a failed tool call",
        trace_id=TRACE, span_id=SPAN, tenant="acme", service="billing", agent="",
        conversation_id="", risk_tier="", policy="p.yaml", trace_start_ns=now - MINUTE_NS,
        trace_end_ns=now, detected_at_ns=now - 2 * MINUTE_NS,
        details={"scope": "service=billing", "state": "firing",
                 "examples": [{"trace_id": TRACE, "span_id": SPAN}]},
    )  # fmt: skip
    store.insert("alerts", [firing.row()], list(ALERT_COLUMNS))
    return now


@pytest.fixture
def with_store(store: ClientStore, monkeypatch: pytest.MonkeyPatch) -> None:
    @contextlib.contextmanager
    def opened(args: Any) -> Iterator[ClientStore]:
        yield store

    monkeypatch.setattr(monitors, "cli_store", opened)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list_prints_the_latest_figures_of_each_monitor_and_scope_since_then(
    seeded: int, with_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["monitors", "list", "--since", "1h", "--format", "json"], capsys)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]  # JSON lines
    assert [(r["Monitor"], r["Scope"], r["State"], r["Figure"]) for r in rows] == [
        ("tool-errors", "service=billing", "firing", "7.5"),  # the latest of its two
        ("tool-errors", "service=search", "ok", "1.25"),
    ]  # the monitor evaluated a day ago is not listed
    code, table, _ = run(["monitors", "list", "--since", "2d"], capsys)
    assert code == 0 and "latency" in table and "(3 rows)" in table


def test_show_prints_the_series_and_the_alerts_with_their_example_traces(
    seeded: int, with_store: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["monitors", "show", "tool-errors", "--since", "1h"], capsys)
    assert code == 0
    series, alerts = out.split("alerts of tool-errors since 1h:", 1)
    assert series.count("service=billing") == 2 and series.count("service=search") == 1
    assert "7.5% of 400 turns had a failed tool call" in alerts
    assert f"{TRACE}/{SPAN}" in alerts and "firing" in alerts
    code, _, err = run(["monitors", "show", "nope", "--since", "1h"], capsys)
    assert code == 2 and "monitor 'nope': nothing evaluated since 1h" in err


def test_rules_are_the_policys_objectives_as_prometheus_alerts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "version: 1\nmonitors:\n  objectives:\n"
        "    - {name: tool-errors, good: no_tool_error, objective: 0.99}\n"
    )
    code, out, _ = run(["monitors", "rules", "--policy", str(policy)], capsys)
    assert code == 0
    (group,) = yaml.safe_load(out)["groups"]
    names = [rule.get("alert") for rule in group["rules"] if "alert" in rule]
    assert names and all("tool" in name.lower() for name in names)
    policy.write_text("version: 1\nmonitors:\n  scores: []\n")
    code, _, err = run(["monitors", "rules", "--policy", str(policy)], capsys)
    assert code == 2 and "--policy" in err and "declares no objectives" in err
