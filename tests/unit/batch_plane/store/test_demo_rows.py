"""`pathgrade demo clean`'s deletes: every row the demo's marks lead to goes (its traces'
spans, roots, alerts and scores, its runs with their scores and gates, its datasets), the
rest stays, and the per-minute span counts are those of the spans that stay."""

from __future__ import annotations

import time

from pathgrade.batch_plane.evaluation.datasets import DatasetItem, Datasets
from pathgrade.batch_plane.evaluation.runs import RunRecord, record_run
from pathgrade.batch_plane.scoring.scores import Score, write_scores
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.demo_rows import WHERE, delete_demo_rows, demo_row_counts
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.schemas.demo_marks import DEMO_OWNER, DEMO_RESOURCE_ATTRIBUTES
from pathgrade.schemas.genai import PG_FEEDBACK
from pathgrade.schemas.model import EvalContext, GenAIFields, Span

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

MINUTE_NS = 1_796_000_040_000_000_000  # all spans in one minute, of one service
TABLES_WITH_DEMO_ROWS = {table for table, _ in WHERE}


def turn(trace_id: str, demo: bool, run_id: str = "", tool: str = "lookup_order") -> list[Span]:
    """A root (of a conversation, with the user's negative feedback) and one tool span of
    service `support-agent` (marked demo data or not)."""
    resource = {"service.name": "support-agent", **(DEMO_RESOURCE_ATTRIBUTES if demo else {})}
    root = Span("default", trace_id, "a" * 16, "", "invoke_agent support-agent", "Internal",
                MINUTE_NS, MINUTE_NS + 10, service_name="support-agent",
                resource_attributes=resource, eval=EvalContext(run_id=run_id),
                attributes={PG_FEEDBACK: "thumbs_down"},
                genai=GenAIFields(operation="invoke_agent", agent_name="support-agent",
                                  conversation_id=f"conversation-{trace_id}"),
                )  # fmt: skip
    call = Span("default", trace_id, "b" * 16, "a" * 16, f"execute_tool {tool}", "Internal",
                MINUTE_NS + 1, MINUTE_NS + 2, service_name="support-agent",
                resource_attributes=resource,
                genai=GenAIFields(operation="execute_tool", tool_name=tool))  # fmt: skip
    return [root, call]


def alert_and_score(store: ClientStore, trace_id: str, run_id: str = "") -> None:
    store.insert("alerts", [["default", f"key-{trace_id}", trace_id, "PG110", "violation"]],
                 ["Tenant", "AlertKey", "TraceId", "Code", "Kind"])  # fmt: skip
    write_scores(store, [Score("sound", "pathgrade.deterministic", "2", "default", trace_id,
                               1.0, run_id=run_id, dataset_item_id="i1")])  # fmt: skip


def gate(store: ClientStore, gate_id: str, candidate: str, baseline: str) -> None:
    store.insert("gates", [[gate_id, time.time_ns() // 1000, candidate, baseline]],
                 ["GateId", "DecidedAt", "CandidateRun", "BaselineRun"])  # fmt: skip
    store.insert("gate_rows", [[gate_id, 0, "sound"]], ["GateId", "RowIndex", "Metric"])


def test_demo_clean_deletes_every_demo_row_and_keeps_the_rest(store: ClientStore) -> None:
    demo_live, demo_eval, kept_live, kept_eval = "d1" * 16, "d2" * 16, "e1" * 16, "e2" * 16
    spans = [*turn(demo_live, True), *turn(demo_eval, True, "demo-run", "issue_refund"),
             *turn(kept_live, False), *turn(kept_eval, False, "own-run")]  # fmt: skip
    store.insert("spans", span_rows(spans), list(SPAN_COLUMNS))
    for trace_id, run_id in ((demo_live, ""), (demo_eval, "demo-run"), (kept_live, ""),
                             (kept_eval, "own-run")):  # fmt: skip
        alert_and_score(store, trace_id, run_id)
    for run_id in ("demo-run", "own-run"):
        record_run(store, RunRecord(run_id, "suite", "agent.py:healthy"))
    gate(store, "gate-demo", "demo-run", "own-run")  # compares a demo run: demo data
    gate(store, "gate-own", "own-run", "own-run")
    datasets = Datasets(store)
    for name, owner in (("golden/demo", DEMO_OWNER), ("golden/own", "qa")):
        datasets.create(name, "golden", owner)
        datasets.add(name, [DatasetItem(item_id="i1", input="q")])

    counted = demo_row_counts(store)
    assert set(counted) == TABLES_WITH_DEMO_ROWS  # every table holds some demo rows
    assert counted["spans"] == 4 and counted["alerts"] == 2 and counted["scores"] == 2
    assert delete_demo_rows(store) == counted
    assert demo_row_counts(store) == {}

    def column(sql: str) -> list:
        return sorted(row[0] for row in store.query(sql).rows)

    assert column("SELECT DISTINCT TraceId FROM spans") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM trace_roots") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM trace_times") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM conversation_traces") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM feedback_spans") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM tool_spans") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM alerts") == [kept_live, kept_eval]
    assert column("SELECT TraceId FROM scores") == [kept_live, kept_eval]
    assert column("SELECT RunId FROM runs") == ["own-run"]
    assert column("SELECT GateId FROM gates") == ["gate-own"]
    assert column("SELECT GateId FROM gate_rows") == ["gate-own"]
    assert column("SELECT Name FROM datasets") == ["golden/own"]
    assert column("SELECT Dataset FROM dataset_items") == ["golden/own"]
    counts = store.query(
        "SELECT GenAIToolName, sum(Spans), sum(Roots) FROM span_counts "
        "GROUP BY GenAIToolName ORDER BY GenAIToolName"
    ).rows
    assert counts == [["", 2, 2], ["lookup_order", 2, 0]]  # the kept spans only
    traces = store.query("SELECT uniqExactMerge(Traces), count() FROM trace_counts").rows
    assert traces == [[2, 1]]  # the kept roots' hour only: the demo roots' is counted again
    assert delete_demo_rows(store) == {}  # nothing left to delete
