"""The browser UI's pages over a real embedded store holding two tenants, through Starlette's
test client (no browser: tests/integration/test_ui_browser.py drives Chromium)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.evaluation.datasets import Datasets, parse_items
from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.evaluation.gate_store import record_gate
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.store import alerts as stored_alerts
from pathgrade.batch_plane.store import trace_list as stored_list
from pathgrade.batch_plane.store.alerts import AlertFilters
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.tenancy import TenantStore
from pathgrade.content.otlp import decode_spans_message
from pathgrade.detectors.prices import shipped_price_table
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.monitors import MonitorTick
from starlette.testclient import TestClient

from pathgrade.demo.sender import send_demo_traces
from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from pathgrade.web.store_reads import ReadStore, viewing
from pathgrade.web.trace_list import TraceQuery, facets, list_traces
from pathgrade.web.viewers import EVERY_TENANT, Viewer, Viewers
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

LOOPBACK = "http://127.0.0.1:8080"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
MARK_B = "tenant-b-marker"  # every row of tenant B carries it somewhere visible


def _store_demo(store: ClientStore, tenant: str, seed: int, traces: int) -> list[str]:
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=traces, seed=seed)
    data = encode_spans(exporter.get_finished_spans()).SerializeToString()
    spans = decode_spans_message(data, tenant, time.time_ns())
    if tenant == "b":
        for span in spans:
            span.service_name = MARK_B
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))
    return list(dict.fromkeys(s.trace_id for s in spans))


def _alert(trace_id: str, tenant: str, code: str, reason: str) -> list[object]:
    return Alert(
        alert_key=f"{tenant}-{trace_id}-{code}", code=code, name="orphan-write",
        severity="high", kind="violation", reason=reason, trace_id=trace_id,
        span_id="", tenant=tenant, service="svc", agent="agent", conversation_id="",
        risk_tier="medium", policy="default", trace_start_ns=time.time_ns() - 10**9,
        trace_end_ns=time.time_ns(), detected_at_ns=time.time_ns(),
    ).row()  # fmt: skip


def _tick(tenant: str, scope: str, at_ns: int, figure: float, state: str) -> MonitorTick:
    return MonitorTick(
        tenant=tenant, monitor="tool-errors", kind="objective", scope=scope, service="",
        agent="", tick_ns=at_ns, window_start_ns=at_ns - 300 * 10**9, window_end_ns=at_ns,
        figure=figure, threshold=5.0, current=figure / 100, baseline=0.01, items=400,
        state=state, episode="ep" if state == "firing" else "",  # type: ignore[arg-type]
        details={"traces": {"service": "svc", "error": "yes"}},
    )  # fmt: skip


def _seed_monitor(store: ClientStore) -> None:
    """Tenant a: the tool-errors objective over 6 evaluations, firing at the last two, and
    its firing alert; tenant b: one evaluation of a scope named by the marker."""
    now = time.time_ns()
    ticks = [_tick("a", "", now - (6 - i) * 60 * 10**9, f, s) for i, (f, s) in
             enumerate([(0.5, "ok"), (1.0, "ok"), (2.0, "ok"), (3.0, "ok"), (9.0, "firing"),
                        (12.0, "firing")])]  # fmt: skip
    MonitorQueries(store).write_ticks([*ticks, _tick("b", f"x={MARK_B}", now, 1.0, "ok")])
    firing = Alert(
        alert_key="monitor-a", code="PG200", name="tool-errors", severity="high",
        kind="monitor", reason="tool-errors: 12.0% of 400 turns had a failed tool call",
        trace_id="", span_id="", tenant="a", service="", agent="", conversation_id="",
        risk_tier="", policy="p.yaml", trace_start_ns=now - 10**9, trace_end_ns=now,
        detected_at_ns=now - 60 * 10**9, details={"state": "firing"},
    )  # fmt: skip
    store.insert("alerts", [firing.row()], list(ALERT_COLUMNS))


@pytest.fixture(scope="module")
def seeded(store: ClientStore) -> dict[str, list[str]]:
    """Tenant a: 30 demo traces; tenant b: 5 (marked); one trace id in both; alerts, scores,
    a dataset, a run and a gate per tenant."""
    traces = {"a": _store_demo(store, "a", 21, 30), "b": _store_demo(store, "b", 5, 5)}
    shared = traces["a"][0]
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=1, seed=77)
    data = encode_spans(exporter.get_finished_spans()).SerializeToString()
    twin = decode_spans_message(data, "b", time.time_ns())
    for span in twin:
        span.trace_id, span.name, span.service_name = shared, MARK_B, MARK_B
    store.insert("spans", span_rows(twin), list(SPAN_COLUMNS))
    store.insert(
        "alerts",
        [_alert(traces["a"][1], "a", "PG110", "write on a read turn"),
         _alert(traces["b"][0], "b", "PG110", MARK_B)],
        list(ALERT_COLUMNS),
    )  # fmt: skip
    write_scores(store, [
        Score("faithfulness", "judge", "1", "a", traces["a"][1], value=0.5, label="fail",
              explanation="unsupported refund claim", run_id="run-a", dataset_item_id="i1"),
        Score("faithfulness", "judge", "1", "b", traces["b"][0], value=0.1, label=MARK_B,
              run_id="run-b", dataset_item_id="i1"),
    ])  # fmt: skip
    _seed_monitor(store)
    items = parse_items(json.dumps({"item_id": "i1", "input": {"user": "hi"}}))
    for tenant, name in (("a", "golden/a"), ("b", f"golden/{MARK_B}")):
        datasets = Datasets(TenantStore(store, tenant))
        datasets.create(name, "golden", "qa")
        datasets.add(name, items)
        verdict = Verdict(
            suite=f"suite-{tenant}" if tenant == "a" else MARK_B, seed=1, resamples=10,
            confidence=0.95,
            rows=[GateRow(check="metric", metric="faithfulness", passed=False, reason="low",
                          candidate_mean=0.5, baseline_mean=0.9, delta=-0.4,
                          interval=(-0.6, -0.2), n_items=1)],
        )  # fmt: skip
        record_gate(TenantStore(store, tenant), verdict, f"run-{tenant}", f"run-{tenant}", "s.yaml")
    return traces


@pytest.fixture(scope="module")
def client(store: ClientStore, seeded: dict[str, list[str]]) -> Iterator[TestClient]:
    yield TestClient(create_app(UiSettings(store)), base_url=LOOPBACK, follow_redirects=False)


@pytest.fixture(scope="module")
def tokens_client(
    store: ClientStore, seeded: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.yaml"
    tokens.write_text("tok-a: a\ntok-b: b\n")
    app = create_app(UiSettings(store, Viewers(tokens)))
    yield TestClient(app, base_url="http://ui.example", follow_redirects=False)


def test_trace_list_pages_by_keyset_without_gaps_or_repeats(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    reads, prices, seen = ReadStore(store), shipped_price_table(), []
    query = TraceQuery.from_params({"from": "1d"}, time.time_ns())
    while True:
        page = list_traces(reads, Viewer("a"), query, prices, page_size=7)
        seen += [row.trace_id for row in page.rows]
        if page.next_cursor is None:
            break
        query = TraceQuery.from_params({"from": "1d", "after": page.next_cursor.text()},
                                       time.time_ns())  # fmt: skip
    assert sorted(seen) == sorted(seeded["a"]) and len(seen) == len(set(seen))
    starts = [row.start_ns for row in list_traces(reads, Viewer("a"), query, prices).rows]
    assert starts == sorted(starts, reverse=True)


def test_trace_list_filters_and_counts_per_value(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    reads, prices, now = ReadStore(store), shipped_price_table(), time.time_ns()
    everything = list_traces(reads, Viewer("a"), TraceQuery.from_params({"from": "1d"}, now),
                             prices, page_size=100)  # fmt: skip
    tools = dict(everything.facets["tool"])
    tool, calls = next(iter(tools.items()))
    assert (everything.facets["code"], everything.facets["severity"]) == (
        [("PG110", 1), ("PG200", 1)],
        [("high", 2)],
    )  # a's: on a trace and of a monitor
    flagged = [(row.trace_id, row.alerts, row.codes) for row in everything.rows if row.codes]
    assert flagged == [(seeded["a"][1], 1, ["PG110"])]
    chosen = list_traces(reads, Viewer("a"), TraceQuery.from_params(
        {"from": "1d", "tool": tool}, now), prices, page_size=100)  # fmt: skip
    assert chosen.rows and all(tool in row.tools for row in chosen.rows)
    assert len(chosen.rows) < len(everything.rows)
    assert sum(row.tools.count(tool) for row in chosen.rows) <= calls
    alerted = list_traces(reads, Viewer("a"), TraceQuery.from_params(
        {"from": "1d", "code": "PG110"}, now), prices)  # fmt: skip
    assert [row.trace_id for row in alerted.rows] == [seeded["a"][1]]
    assert alerted.rows[0].codes == ["PG110"] and alerted.rows[0].scores == 1
    assert (alerted.rows[0].alerts, alerted.rows[0].severity) == (1, "high")
    assert (alerted.facets["code"], alerted.facets["severity"]) == ([("PG110", 1)], [("high", 1)])
    slow = max(row.duration_ns for row in everything.rows)
    longest = list_traces(reads, Viewer("a"), TraceQuery.from_params(
        {"from": "1d", "min_ms": str(slow / 1e6)}, now), prices)  # fmt: skip
    assert [row.duration_ns for row in longest.rows] == [slow]
    costly = list_traces(reads, Viewer("a"), TraceQuery.from_params(
        {"from": "1d", "min_cost": "0.003"}, now), prices, page_size=100)  # fmt: skip
    assert costly.rows and all(row.cost_usd >= 0.003 for row in costly.rows)
    named = list_traces(reads, Viewer("a"), TraceQuery.from_params(
        {"from": "1d", "q": "ISSUE_REFUND"}, now), prices, page_size=100)  # fmt: skip
    assert named.rows and all("issue_refund" in row.tools for row in named.rows)


def test_a_filtered_first_page_and_its_counts_are_those_read_apart(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    """The first page of a filtered list, newest first, is read with the newest matching
    traces its counts are over: the same rows and counts as each read on its own."""
    reads, prices, now = ReadStore(store), shipped_price_table(), time.time_ns()
    everything = list_traces(reads, Viewer("a"), TraceQuery.from_params({"from": "1d"}, now),
                             prices)  # fmt: skip
    service = everything.facets["service"][0][0]
    for filters in ({"service": service}, {"error": "no"}, {"q": "issue_refund"}):
        query = TraceQuery.from_params({"from": "1d", **filters}, now)
        page = list_traces(reads, Viewer("a"), query, prices, page_size=2)
        roots = stored_list.roots(reads, Viewer("a"), query, prices.models, 3)
        assert [row.trace_id for row in page.rows] == [trace for _, trace, *_ in roots[:2]]
        assert page.rows and (page.next_cursor is not None) == (len(roots) > 2), filters
        assert page.facets == facets(reads, Viewer("a"), query, prices), filters
        assert page.facets["service"], filters


def test_the_alerts_pages_counts_in_one_read_are_the_counts_grouped_apart(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    """`tallies` (one read of `alerts`) counts as a GROUP BY per facet and per interval."""
    now = time.time_ns()
    for viewer in (Viewer(None), Viewer("a"), Viewer("b")):
        filters = AlertFilters(now - 86_400 * 10**9, now + 1)
        tally = stored_alerts.tallies(ReadStore(store), viewer, filters, now - 7200 * 10**9,
                                      600 * 10**9)  # fmt: skip
        where, values = filters.where(viewer)
        counted = store.query(f"SELECT count() FROM alerts FINAL WHERE {where}", values)
        assert tally.total == counted.rows[0][0] > 0
        for facet, column in stored_alerts.FACETS.items():
            grouped = store.query(
                f"SELECT {column}, count() AS n FROM alerts FINAL WHERE {where} "
                f"GROUP BY {column} ORDER BY n DESC, {column}",
                values,
            ).rows
            assert tally.top(facet, 100) == [(value, n) for value, n in grouped], facet
        intervals = store.query(
            "SELECT intDiv(DetectedAtNs - {first:Int64}, 600000000000) AS b, Code, count() "
            f"FROM alerts FINAL WHERE {where} GROUP BY b, Code",
            {**values, "first": now - 7200 * 10**9},
        ).rows
        assert sorted(tally.per_interval) == sorted(tuple(row) for row in intervals)


def test_the_counts_name_their_unit_spans_over_the_range_traces_when_filtered(
    client: TestClient,
) -> None:
    """Unfiltered, the counts per agent, tool and model are spans over the range; filtered,
    traces among the newest matching ones: each heading says which."""
    over_range = client.get("/traces?from=1d").text
    filtered = client.get("/traces?from=1d&error=no").text
    for heading in ("Agent (spans)", "Tool (calls)", "Model (calls)"):
        assert f"<h4>{heading}</h4>" in over_range and heading not in filtered
    for heading in ("Agent (traces)", "Tool (traces)", "Model (traces)"):
        assert f"<h4>{heading}</h4>" in filtered and heading not in over_range


def test_pages_render_and_name_a_bad_parameter(client: TestClient) -> None:
    for path in (
        "/traces?from=1d",
        "/alerts?from=1d",
        "/runs",
        "/datasets",
        "/edge",
        "/review",
        "/health",
        "/detectors",
        "/dataset?name=golden/a&version=1",
        "/gates/nope",
        "/dataset-item/i1",
        "/compare?candidate=run-a&baseline=run-b",
    ):
        answer = client.get(path)
        assert answer.status_code in (200, 404), (path, answer.text[:300])
        assert "<h1>" in answer.text
    bad = client.get("/traces?min_ms=fast")
    assert bad.status_code == 400 and "min_ms: expected a number" in bad.text
    assert client.get("/trace/zz").status_code == 400
    assert client.get("/traces?from=yesterday").status_code == 400


def test_the_alerts_page_charts_each_monitor_against_its_threshold_with_trace_links(
    client: TestClient,
) -> None:
    page = client.get("/alerts?from=1h").text
    card = page.split('id="monitor-tool-errors"', 1)[1].split('<div class="card wide', 1)[0]
    assert 'data-state="firing"' in page.split('id="monitor-tool-errors"', 1)[1][:200]
    assert card.count("<circle") == 6 and card.count('class="firing"') == 2
    assert 'class="threshold"' in card and "threshold 5" in card
    assert "figure 12 against 5" in card
    behind = card.split("traces behind the latest figure", 1)[0].rsplit('href="', 1)[1]
    assert behind.startswith("/traces?error=yes&amp;service=svc&amp;from=")  # its turns
    assert "kind=monitor" in card and "code=PG200" in card
    row = page.split('id="alert-table"', 1)[1].split("monitor-a", 1)[0]
    assert '<a href="#monitor-tool-errors"><b>PG200</b></a>' in page
    assert "/trace/" not in row.split("tool-errors: 12.0%", 1)[1]  # no trace to link to
    only_detectors = client.get("/alerts?from=1h&kind=violation").text
    assert 'id="monitor-tool-errors"' not in only_detectors


def test_trace_page_pins_findings_and_chooses_between_tenants(
    client: TestClient, seeded: dict[str, list[str]]
) -> None:
    flagged = client.get(f"/trace/{seeded['a'][1]}")
    assert flagged.status_code == 200
    assert 'class="wf-row flagged' in flagged.text and "PG110" in flagged.text
    assert "unsupported refund claim" in flagged.text  # the score's explanation
    shared = client.get(f"/trace/{seeded['a'][0]}")  # loopback sees both tenants' twin
    assert shared.status_code == 200 and "?tenant=a" in shared.text and "?tenant=b" in shared.text


def test_a_tenants_viewer_sees_no_row_of_another_tenant(
    tokens_client: TestClient, seeded: dict[str, list[str]]
) -> None:
    login = tokens_client.post("/login", content="token=tok-a&next=/traces",
                               headers=FORM)  # fmt: skip
    assert login.status_code == 303 and login.headers["location"] == "/traces"
    pages = ["/traces?from=1d", "/alerts?from=1d", "/runs", "/datasets", "/review", "/edge",
             f"/trace/{seeded['a'][0]}", f"/trace/{seeded['a'][0]}?tenant=b",
             f"/trace/{seeded['b'][0]}", "/gates/" + "x", "/dataset-item/i1",
             "/compare?candidate=run-a&baseline=run-b",
             f"/dataset?name=golden/{MARK_B}&version=1", "/traces?from=1d&code=PG110"]  # fmt: skip
    for path in pages:
        answer = tokens_client.get(path)
        if MARK_B in path:  # b's dataset by name: not found (the message repeats the name)
            assert answer.status_code == 404, path
            continue
        assert MARK_B not in answer.text, path
        assert "run-b" not in answer.text or "run-b" in path, path
    assert tokens_client.get(f"/trace/{seeded['b'][0]}").status_code == 404
    assert tokens_client.get(f"/trace/{seeded['a'][0]}").status_code == 200
    tokens_client.cookies.clear()
    anonymous = tokens_client.get("/traces")
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/login")
    wrong = tokens_client.post("/login", content="token=nope",
                               headers=FORM)  # fmt: skip
    assert wrong.status_code == 401 and "not known" in wrong.text
    bearer = tokens_client.get("/traces?from=1d", headers={"Authorization": "Bearer tok-b"})
    assert bearer.status_code == 200 and MARK_B in bearer.text


def test_every_query_of_a_viewer_is_scoped_even_without_its_own_condition(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    reads = ReadStore(store)
    unscoped = "SELECT DISTINCT Tenant FROM spans WHERE TraceId IN (SELECT TraceId FROM alerts)"
    with viewing("a"):
        assert reads.rows(unscoped) == [["a"]]
        assert reads.value("SELECT count() FROM alerts_view WHERE Tenant = 'b'") == 0
    assert sorted(r[0] for r in reads.rows(unscoped)) == ["a", "b"]


def test_without_a_tokens_file_only_loopback_hosts_are_served(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    app = create_app(UiSettings(store))
    rebound = TestClient(app, base_url="http://attacker.example")
    assert rebound.get("/traces").status_code == 403
    assert TestClient(app, base_url="http://[::1]:8080").get("/health").status_code == 200


def test_a_red_banner_on_every_page_when_storing_stopped(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    snapshots = iter([
        {"taken_at": 1.0, "collector": {"accepted_spans": 100}, "store_writer": {"spans": 100},
         "realtime": [{"traces_evaluated": 20}]},
        {"taken_at": 6.0, "collector": {"accepted_spans": 150}, "store_writer": {"spans": 100},
         "realtime": [{"traces_evaluated": 20}]},  # a writer's batch and a quiet window
        {"taken_at": 40.0, "collector": {"accepted_spans": 180}, "store_writer": {"spans": 100},
         "realtime": [{"traces_evaluated": 35}]},
    ])  # fmt: skip
    latest: dict[str, object] = {}

    def status() -> dict[str, object]:
        return latest

    client = TestClient(create_app(UiSettings(store, status=status)), base_url=LOOPBACK)
    latest.update(snapshot=next(snapshots), line="status: fine")
    assert 'id="stopped-banner"' not in client.get("/traces").text
    latest.update(snapshot=next(snapshots), line="status: 5 s later, nothing stored yet")
    assert 'id="stopped-banner"' not in client.get("/traces").text
    latest.update(snapshot=next(snapshots), line="status: stuck")
    for path in ("/traces", "/alerts", "/runs", "/health"):
        page = client.get(path).text
        assert 'id="stopped-banner"' in page, path
        assert "storing has stopped: 30 spans arrived, none was stored" in page
        assert "evaluating has stopped" not in page


def coverage_of(tenant: str, service: str, traces: int) -> dict[str, object]:
    """A realtime process's coverage figures: one gap of PG113 on `service`."""
    return {
        "services": [{"tenant": tenant, "service": service, "traces": traces}],
        "gaps": [{"tenant": tenant, "service": service, "code": "PG113",
                  "name": "no-clean-termination", "undecided": traces, "missing": "messages",
                  "close": "capture messages"}],
    }  # fmt: skip


def test_a_tenants_health_page_shows_its_coverage_and_no_figure_of_the_others(
    store: ClientStore, seeded: dict[str, list[str]], tmp_path: Path
) -> None:
    """The operator (loopback, no tokens) sees every process's counters and every tenant's
    gaps; a tenant's viewer sees which stages move and its own gaps, nothing else."""
    worker = {"traces_evaluated": 4_321, "coverage": {
        "services": [*coverage_of("a", "svc-a", 7)["services"],
                     *coverage_of("b", MARK_B, 9_876)["services"]],
        "gaps": [*coverage_of("a", "svc-a", 7)["gaps"], *coverage_of("b", MARK_B, 9_876)["gaps"]],
    }}  # fmt: skip
    snapshots = iter([
        {"taken_at": 1.0, "collector": {"accepted_spans": 1_000}, "store_writer": {"spans": 1_000},
         "realtime": [worker]},
        {"taken_at": 40.0, "collector": {"accepted_spans": 5_555}, "store_writer": {"spans": 1_000},
         "realtime": [worker]},
    ])  # fmt: skip
    latest = {"snapshot": next(snapshots), "line": "status: in 5,555 spans"}
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tok-a: a\n")
    operator = TestClient(create_app(UiSettings(store, status=lambda: latest)), base_url=LOOPBACK)
    viewer = TestClient(
        create_app(UiSettings(store, Viewers(tokens), status=lambda: latest)),
        base_url="http://ui.example", headers={"Authorization": "Bearer tok-a"},
    )  # fmt: skip
    operator.get("/health")
    viewer.get("/health")
    latest = {"snapshot": next(snapshots), "line": "status: in 5,555 spans"}
    seen = operator.get("/health").text
    assert MARK_B in seen and "svc-a" in seen and "4,321" in seen and "5,555" in seen
    for path in ("/health", "/traces?from=1d", "/alerts?from=1d"):
        page = viewer.get(path).text
        assert "storing has stopped" in page, path
        for figure in (MARK_B, "9,876", "4,321", "5,555", "4,555", "status: in"):
            assert figure not in page, (path, figure)
    assert "svc-a" in viewer.get("/health").text


def test_the_waterfall_puts_children_under_parents_on_one_axis(
    store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    from pathgrade.batch_plane.store.trace_rows import load_trace

    from pathgrade.web.trace_view import waterfall

    trace = load_trace(store, "a", seeded["a"][2])
    assert trace is not None
    rows, start, duration = waterfall(trace.spans)
    assert rows[0].depth == 0 and rows[0].offset_pct == 0.0 and rows[0].width_pct == 100.0
    for row in rows[1:]:
        assert row.depth == 1
        assert row.offset_pct == pytest.approx(100 * (row.span.start_ns - start) / duration)
        assert row.width_pct == pytest.approx(100 * row.span.duration_ns / duration)
    orphan = trace.spans[1]
    orphan.parent_span_id = "f" * 16  # a parent that was never stored
    assert [r.depth for r in waterfall(trace.spans)[0] if r.span is orphan] == [0]


def test_gate_report_is_one_file_with_the_failing_rows() -> None:
    from pathgrade.web.gate_page import Attempt as Scored
    from pathgrade.web.gate_page import GateView, ItemScores, standalone_html

    row = GateRow(check="metric", metric="reference_match", layer="answer", passed=False,
                  reason="mean 0.5000 below threshold 0.95", candidate_mean=0.5)  # fmt: skip
    ok = GateRow(check="metric", metric="tool_correctness", layer="tool use", passed=True,
                 reason="ok")  # fmt: skip
    verdict = Verdict(suite="s", seed=3, resamples=100, confidence=0.95, rows=[row, ok])
    evidence = {"reference_match": {"i1": ItemScores("i1", {}, [Scored(0, 0.0, "t" * 32, "a")],
                                                     [Scored(0, 1.0, "u" * 32, "a")])}}  # fmt: skip
    page = standalone_html(GateView(verdict, "gate-1", "cand", "base", "", evidence))
    assert "<link" not in page and "<script" not in page and "<style>" in page
    assert 'class="gate-row failed" data-metric="reference_match"' in page
    assert 'class="gate-row passed" data-metric="tool_correctness"' in page
    assert "below threshold" in page and "-1.0000" in page  # the item's delta
    layers = re.findall(r'<tbody class="layer" data-layer="([^"]+)">', page)
    assert layers == ["tool use", "answer"]  # report order, not the verdict's
    answer = page.split('data-layer="answer">')[1]
    assert "1 of 1 rows failed" in answer.split("</tr>")[0]


def test_run_means_by_layer_leave_out_efficiency_and_undecided_scores() -> None:
    from pathgrade.web.eval_pages import _layer_means

    rows = [("r", "PG121", 4, 3.0, 4), ("r", "context_recall", 2, 0.5, 1),
            ("r", "tokens", 4, 1000.0, 4), ("r", "PG119", 2, None, 0)]  # fmt: skip
    assert _layer_means(rows) == [("retrieval", 0.5), ("hand-off", 0.75)]


def test_metrics_text_reads_back_into_a_status_snapshot() -> None:
    from pathgrade.stack.metrics import prometheus_text
    from pathgrade.web.scraped_status import parse_metrics

    text = prometheus_text([
        ("collector", {}, {"accepted_spans": 12, "spill_bytes": 7}),
        ("realtime", {"worker": "1"}, {"traces_evaluated": 3, "detection_delay_p99_seconds": 1.5}),
    ])  # fmt: skip
    assert parse_metrics(text) == {
        "collector": {"accepted_spans": 12, "spill_bytes": 7},
        "realtime": {"traces_evaluated": 3, "detection_delay_p99_seconds": 1.5},
    }
    assert EVERY_TENANT.where() == "1"


def test_a_conversation_without_graph_nodes_says_why_it_has_no_next_turn_advice(
    store: ClientStore, client: TestClient, seeded: dict[str, list[str]]
) -> None:
    conversation = ReadStore(store).value(
        "SELECT any(GenAIConversationId) FROM spans WHERE Tenant = 'a' "
        "AND GenAIConversationId != ''"
    )
    page = client.get(f"/conversation/{conversation}")
    assert page.status_code == 200, page.text
    panel = page.text[page.text.index('id="next-turn"') :]
    assert "no turn of this conversation has a graph node span" in panel
    assert 'class="recommend"' not in panel


def test_trace_page_shows_a_spans_records_beside_its_events(
    client: TestClient, tokens_client: TestClient, store: ClientStore, seeded: dict[str, list[str]]
) -> None:
    """Records stored in `logs` are read back with their trace, tied to their span: the
    page lists them under the span, a message a record carries is the span's message, and
    another tenant's viewer sees none of them."""
    from pathgrade.batch_plane.store.log_rows import LOG_COLUMNS, log_row
    from pathgrade.batch_plane.store.trace_rows import load_trace
    from pathgrade.schemas.model import LogRecord

    trace = load_trace(store, "a", seeded["a"][4])
    assert trace is not None
    span = next(s for s in trace.spans if not s.genai.output_messages)
    at = span.start_ns + 1_000

    def record(name: str, attributes: dict[str, object], body: object = None) -> LogRecord:
        return LogRecord(tenant="a", trace_id=span.trace_id, span_id=span.span_id, time_ns=at,
                         observed_ns=at, event_name=name, severity_text="INFO",
                         attributes=attributes, body=body,
                         received_at_ns=time.time_ns())  # fmt: skip

    records = [
        record("gen_ai.tool.call.decision",
               {"gen_ai.tool.call.decision.outcome": "require_approval",
                "gen_ai.tool.call.id": "call-7", "pathgrade.facts.pii": "card"}),
        record("gen_ai.choice", {}, {"message": {"content": "record-carried answer"},
                                     "finish_reason": "stop"}),
    ]  # fmt: skip
    store.insert("logs", [log_row(r) for r in records], list(LOG_COLUMNS))
    reread = load_trace(store, "a", span.trace_id)
    assert reread is not None
    joined = next(s for s in reread.spans if s.span_id == span.span_id)
    assert sorted(r.event_name for r in joined.records) == [
        "gen_ai.choice",
        "gen_ai.tool.call.decision",
    ]
    assert "record-carried answer" in joined.genai.output_messages
    assert all(not s.records for s in reread.spans if s.span_id != span.span_id)
    page = client.get(f"/trace/{span.trace_id}?tenant=a").text
    assert "gen_ai.tool.call.decision" in page and "require_approval" in page
    assert "pathgrade.facts.pii" in page and "record-carried answer" in page
    other = tokens_client.get(f"/trace/{span.trace_id}", headers={"Authorization": "Bearer tok-b"})
    assert other.status_code == 404 and "require_approval" not in other.text
