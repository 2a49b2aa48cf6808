"""Recorded gate verdicts on a real embedded store: record, list, print again, query rows."""

from __future__ import annotations

import pytest
from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.evaluation.gate_report import to_json, to_markdown
from pathgrade.batch_plane.evaluation.gate_store import (
    MissingGate,
    load_verdict,
    record_gate,
)
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.gates import list_gates

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.unit.batch_plane.evaluation.test_gate_report import make_verdict


def passing_verdict(suite: str) -> Verdict:
    row = GateRow(check="metric", metric="tool_correctness", n_items=4, candidate_mean=1.0,
                  threshold=0.9, passed=True, reason="ok")  # fmt: skip
    return Verdict(suite=suite, seed=7, resamples=100, confidence=0.95, rows=[row])


def test_a_recorded_verdict_prints_again_exactly(store: ClientStore) -> None:
    verdict = make_verdict()
    gate_id = record_gate(store, verdict, "run-cand", "run-base", "suite.yaml")
    assert gate_id.startswith("gate-") and len(gate_id) == 17
    again = load_verdict(store, gate_id)
    assert again == verdict
    assert to_json(again) == to_json(verdict) and to_markdown(again) == to_markdown(verdict)


def test_gate_rows_hold_each_row_for_sql(store: ClientStore) -> None:
    gate_id = record_gate(store, make_verdict(), "run-c2", "run-b2", "suite.yaml")
    rows = store.query(
        "SELECT RowIndex, Check, Metric, Slice, Passed, Items, PairedItems, UnpairedItems, "
        "IntervalLow, IntervalHigh, Threshold, Reason FROM gate_rows FINAL "
        "WHERE GateId = {g:String} ORDER BY RowIndex",
        {"g": gate_id},
    ).rows
    assert [row[:5] for row in rows] == [
        [0, "metric", "task_completion", "", True],
        [1, "metric", "task_completion", "intent=cancel|refund", False],
        [2, "budget", "p95_latency_s", "", False],
    ]
    assert rows[0][5:11] == [300, 298, 2, -0.004, 0.021, 0.85]
    assert rows[2][8:10] == [None, None]  # no interval on a budget row
    assert rows[2][11].startswith("no observations for p95_latency_s")


def test_gates_are_listed_newest_first_and_by_suite(store: ClientStore) -> None:
    first = record_gate(store, passing_verdict("billing"), "run-1", "run-0", "billing.yaml")
    second = record_gate(store, make_verdict(), "run-2", "run-1", "support.yaml")
    third = record_gate(store, passing_verdict("billing"), "run-3", "run-1", "billing.yaml")
    listed = list_gates(store, limit=100)
    ids = [row[0] for row in listed.rows]
    assert ids.index(third) < ids.index(second) < ids.index(first)
    billing = list_gates(store, "billing")
    assert [row[0] for row in billing.rows] == [third, first]
    columns = dict(zip(billing.columns, billing.rows[0], strict=True))
    assert columns["Verdict"] == "PASS" and columns["CandidateRun"] == "run-3"
    assert (columns["FailedRows"], columns["TotalRows"], columns["Seed"]) == (0, 1, 7)
    assert len(list_gates(store, limit=1).rows) == 1


def test_an_unknown_gate_is_a_missing_gate(store: ClientStore) -> None:
    with pytest.raises(MissingGate, match="gate 'gate-nope': not in the store"):
        load_verdict(store, "gate-nope")
