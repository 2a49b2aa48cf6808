"""Coverage gaps (realtime_plane.coverage): cannot-decide findings counted per (tenant,
service, detector), one alert per window, figures that add up across consumers and show
in status, metrics and the browser view; per-trace alerts only where a high tier asks."""

from __future__ import annotations

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.detectors import Finding, default_policy, run_detectors
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.coverage import Coverage, coverage_rows
from pathgrade.realtime_plane.evaluate import Evaluation, TurnEvaluator
from pathgrade.schemas.model import SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, Trace
from starlette.testclient import TestClient

from pathgrade.stack.metrics import labelled_samples, prometheus_text
from pathgrade.stack.status import coverage_of, snapshot_of, status_line, status_report
from pathgrade.web.app import create_app
from pathgrade.web.rendering import UiSettings
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.traces import TraceBuilder

HOUR_NS = 3600 * 10**9
LOOPBACK = "http://127.0.0.1:8080"


def gap_trace(trace_id: str, turn_kind: str | None = None) -> Trace:
    """A write on a turn whose kind nobody recorded: PG110 cannot decide."""
    b = TraceBuilder(trace_id, turn_kind=turn_kind)
    b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
    return b.build()


def evaluate(
    evaluator: TurnEvaluator, trace_id: str, now_ns: int, again: bool = False
) -> Evaluation:
    return evaluator.evaluate(DueTurn(gap_trace(trace_id), "quiet", again), now_ns)


def test_a_gap_alerts_once_per_window_and_is_counted_per_trace() -> None:
    evaluator = TurnEvaluator(default_policy(), coverage_window_s=3600)
    first = evaluate(evaluator, "a" * 32, 10 * HOUR_NS)
    (alert,) = [a for a in first.new_alerts if a.code == "PG110"]
    assert alert.kind == "cannot_decide" and alert.severity == "low"
    assert alert.details["coverage_gap"] and "pathgrade.turn.kind" in alert.details["close"]
    assert "1 of 1 traces" in alert.reason
    later = [evaluate(evaluator, f"{n:032x}", 10 * HOUR_NS + n) for n in range(1, 5)]
    assert all(not e.new_alerts for e in later)  # the same window: figures only
    evaluate(evaluator, "a" * 32, 10 * HOUR_NS + 5, again=True)  # re-evaluated: counted once
    (row,) = coverage_rows([evaluator.coverage.figures()])
    assert (row["code"], row["traces"], row["undecided"], row["coverage"]) == ("PG110", 5, 5, 0.0)
    next_window = evaluate(evaluator, "c" * 32, 11 * HOUR_NS)
    (again,) = next_window.new_alerts
    assert again.alert_key != alert.alert_key and "6 of 6 traces" in again.reason


def test_a_gap_of_a_turn_whose_context_is_pending_is_counted_but_alerts_only_once_settled() -> None:
    """The span enclosing the turn (a session span holding the turn kind or identity)
    has not come: the gap counts, and the window's alert waits for a turn graded with
    everything it will get."""
    evaluator = TurnEvaluator(default_policy())
    turn = gap_trace("a" * 32)
    top = turn.spans[0]
    top.parent_span_id, top.flags = "5e5510" * 2 + "0000", SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
    pending = DueTurn(
        Trace(turn.tenant, turn.trace_id, turn.spans, [], top.span_id), "quiet", False
    )
    assert pending.context_pending
    assert [a for a in evaluator.evaluate(pending, 1).new_alerts if a.code == "PG110"] == []
    (row,) = coverage_rows([evaluator.coverage.figures()])
    assert (row["traces"], row["undecided"]) == (1, 1)
    (alert,) = [a for a in evaluate(evaluator, "a" * 32, 2, again=True).new_alerts]
    assert alert.code == "PG110" and alert.kind == "cannot_decide"


def test_decided_traces_raise_the_coverage_figure() -> None:
    evaluator = TurnEvaluator(default_policy())
    evaluate(evaluator, "a" * 32, 1)
    for n in range(3):
        b = TraceBuilder(f"{n + 1:032x}", turn_kind="action")
        b.tool("change_plan", {"account_id": "cust-1"}, effect="write")
        evaluator.evaluate(DueTurn(b.build(), "quiet", False), 2)
    (row,) = coverage_rows([evaluator.coverage.figures()])
    assert (row["traces"], row["undecided"], row["coverage"]) == (4, 1, 0.75)


def test_a_high_tier_that_requires_the_check_alerts_per_trace() -> None:
    trace = gap_trace("a" * 32)
    trace.root.attributes["pathgrade.risk_tier"] = "high"  # PG110 is required at high
    evaluator = TurnEvaluator(default_policy())
    evaluation = evaluator.evaluate(DueTurn(trace, "quiet", False), 1)
    (alert,) = [a for a in evaluation.new_alerts if a.code == "PG110"]
    assert "coverage_gap" not in alert.details and alert.severity == "high"
    assert coverage_rows([evaluator.coverage.figures()]) == []


def test_figures_add_up_across_consumers() -> None:
    one, two = Coverage(), Coverage()
    gap = _finding(gap_trace("a" * 32))
    one.observe("t", "svc", [gap], 1)
    two.observe("t", "svc", [], 1)  # the other consumer decided its trace
    two.observe("t", "svc", [], 1)
    (row,) = coverage_rows([one.figures(), two.figures(), None])
    assert (row["traces"], row["undecided"]) == (3, 1) and round(row["coverage"], 2) == 0.67


def _finding(trace: Trace) -> Finding:
    (gap,) = [f for f in run_detectors(trace, default_policy().resolve()) if f.code == "PG110"]
    return gap


def snapshot_with_gap() -> dict:
    coverage = Coverage()
    coverage.observe("default", "billing", [_finding(gap_trace("a" * 32))], 1)
    coverage.observe("default", "billing", [], 1)
    realtime = {"traces_evaluated": 2, "alerts": 1, "traces_held": 0,
                "coverage": coverage.figures(), "detector_errors": {"PG105": 2}}  # fmt: skip
    collector = {"accepted_spans": 9, "rejected_spans": 0, "spill_bytes": 0}
    return snapshot_of(collector, {"spans": 9, "rejected_spans": 0}, [realtime], None)


def test_status_metrics_and_the_overview_show_the_gap_and_how_to_close_it(
    store: ClientStore,
) -> None:
    snapshot = snapshot_with_gap()
    assert ", 1 coverage gap" in status_line(snapshot)
    report = status_report({"snapshot": snapshot, "line": None})
    assert "PG110 orphan-write on billing: 50% of 2 traces; missing turn_kind" in report
    assert "to close: name what users' requests for the writes look like (policy `requests`)" in (
        report
    )
    assert "PG105: 2" in report
    assert "coverage=" not in report  # structured entries are not k=v counters
    text = prometheus_text(labelled_samples("realtime", {"worker": "1"}, snapshot["realtime"][0]))
    assert (
        'pathgrade_realtime_coverage_ratio{code="PG110",service="billing",tenant="default",'
        'worker="1"} 0.5' in text
    )
    assert 'pathgrade_realtime_detector_errors_total{code="PG105",worker="1"} 2' in text
    assert "# TYPE pathgrade_realtime_coverage_ratio gauge" in text
    assert [g["code"] for g in coverage_of(snapshot)] == ["PG110"]
    document: dict = {"snapshot": snapshot, "line": "status: ..."}
    client = TestClient(create_app(UiSettings(store, status=lambda: document)), base_url=LOOPBACK)
    page = client.get("/health").text
    assert "Coverage gaps" in page and "PG110" in page and "50%" in page
    assert "set `pathgrade.turn.kind`" in page.replace("&#96;", "`")
    assert "{&#39;services&#39;" not in page and "{'services'" not in page  # not a counter
    document["snapshot"] = snapshot_of(None, {"spans": 0, "rejected_spans": 0}, [], None)
    assert "Coverage gaps" not in client.get("/health").text
