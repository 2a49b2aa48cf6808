"""deploy/grafana/pathgrade.json: every panel's SQL runs on pathgrade's real tables (chDB,
migrated) holding demo traffic, its alerts and scores, and finds that data; time series
panels return a `time` column first. The ClickHouse plugin's macros are expanded as its
documentation describes them."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import TurnAssembler
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas.alerts import ALERT_COLUMNS

from pathgrade.demo.sender import send_demo_traces
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.paths import REPO_ROOT

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "pathgrade.json"
PLUGIN = "grafana-clickhouse-datasource"


def expand_macros(
    sql: str, start_s: int, end_s: int, tenants: tuple[str, ...] = ("default",)
) -> str:
    """The plugin's macros ($__timeFilter(col), $__timeInterval(col), $__fromTime,
    $__toTime, $__interval_s) and Grafana's `${tenant:singlequote}` (the selected tenants,
    quoted, comma-separated)."""
    interval_s = 60
    sql = sql.replace("${tenant:singlequote}", ", ".join(f"'{t}'" for t in tenants))
    sql = re.sub(
        r"\$__timeFilter\((\w+)\)",
        rf"\1 >= toDateTime({start_s}) AND \1 <= toDateTime({end_s})",
        sql,
    )
    sql = re.sub(
        r"\$__timeInterval\((\w+)\)",
        rf"toStartOfInterval(toDateTime(\1), INTERVAL {interval_s} second)",
        sql,
    )
    sql = sql.replace("$__fromTime", f"toDateTime({start_s})")
    sql = sql.replace("$__toTime", f"toDateTime({end_s})")
    sql = sql.replace("$__interval_s", str(interval_s))
    assert "$__" not in sql, f"a macro this test does not know: {sql}"
    return sql


@pytest.fixture(scope="module")
def loaded(store: ClientStore) -> ClientStore:
    """Demo traffic of two flavors, the alerts the default policy raises on it, scores."""
    finished = []
    for traces, seed, flavor in ((60, 3, "genai"), (20, 4, "openinference")):
        exporter = InMemorySpanExporter()  # the demo shuts its exporter down
        send_demo_traces(exporter, traces=traces, seed=seed, flavor=flavor)
        finished += exporter.get_finished_spans()
    request = encode_spans(finished)
    spans = decode_resource_spans(request.resource_spans, "default", time.time_ns())
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))
    assembler = TurnAssembler()
    assembler.add(0, 0, spans, 0.0)
    evaluator = TurnEvaluator(load_policy(None))
    alerts = [
        a
        for due in assembler.release_all()
        for a in evaluator.evaluate(due, time.time_ns()).new_alerts
    ]
    assert alerts, "the demo traffic raises alerts"
    store.insert("alerts", [a.row() for a in alerts], list(ALERT_COLUMNS))
    trace_ids = sorted({s.trace_id for s in spans})[:10]
    write_scores(
        store,
        [Score("task_completion", "test", "1", "default", t, value=0.5) for t in trace_ids],
    )
    return store


def panels() -> list[dict[str, Any]]:
    return json.loads(DASHBOARD.read_text())["panels"]


def test_every_panel_targets_the_clickhouse_plugin_through_the_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource",
        PLUGIN,
    )
    assert variables["tenant"]["multi"] and variables["tenant"]["includeAll"]
    assert len(panels()) >= 8
    for panel in panels():
        for target in [panel, *panel["targets"]]:
            assert target["datasource"] == {"type": PLUGIN, "uid": "${datasource}"}
        assert {t["editorType"] for t in panel["targets"]} == {"sql"}


@pytest.mark.parametrize("panel", panels(), ids=lambda p: p["title"])
def test_panel_sql_finds_the_data(loaded: ClientStore, panel: dict[str, Any]) -> None:
    now = int(time.time())
    (target,) = panel["targets"]
    result = loaded.query(expand_macros(target["rawSql"], now - 3600, now + 3600))
    assert result.rows, f"{panel['title']}: no rows"
    if target["format"] == 0:  # time series
        assert panel["type"] == "timeseries" and result.columns[0] == "time"
        assert all(row[0] is not None for row in result.rows)
    outside = loaded.query(expand_macros(target["rawSql"], now - 7200, now - 3600))
    assert not outside.rows, f"{panel['title']}: rows outside the time range"
    other = loaded.query(expand_macros(target["rawSql"], now - 3600, now + 3600, ("acme",)))
    assert not other.rows, f"{panel['title']}: rows of another tenant"


def test_the_tenant_variable_lists_the_tenants(loaded: ClientStore) -> None:
    (tenant,) = [v for v in json.loads(DASHBOARD.read_text())["templating"]["list"]
                 if v["name"] == "tenant"]  # fmt: skip
    now = int(time.time())
    assert loaded.query(expand_macros(tenant["query"], now - 3600, now + 3600)).rows == [
        ["default"]
    ]
