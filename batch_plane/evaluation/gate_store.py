"""Recorded release-gate verdicts (tables `gates` and `gate_rows`, migration 0006).

`pathgrade gate` over runs in the store records each verdict it prints: one `gates` row with
the runs it compared and the verdict's JSON report (rows, limits, cases, diffs, efficiency),
and one `gate_rows` row per row of the verdict (with where its limits came from and its
undecided attempts), so gate history is queryable with SQL and any recorded verdict can be printed
again (`load_verdict`) in every report format.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pathgrade.batch_plane.evaluation.gate import GateRow, Verdict
from pathgrade.batch_plane.evaluation.suite import ConfigurationError
from pathgrade.batch_plane.store.gates import verdict_json
from pathgrade.schemas.store import Store

GATE_COLUMNS = [
    "GateId", "DecidedAt", "Suite", "SuiteFile", "CandidateRun", "BaselineRun", "Passed",
    "FailedRows", "TotalRows", "Seed", "Resamples", "Confidence", "Verdict",
]  # fmt: skip
GATE_ROW_COLUMNS = [
    "GateId", "RowIndex", "Check", "Metric", "Slice", "Passed", "Items", "PairedItems",
    "UnpairedItems", "CandidateMean", "BaselineMean", "Delta", "IntervalLow", "IntervalHigh",
    "Threshold", "MaxRegression", "Reason", "ThresholdFrom", "MaxRegressionFrom", "Undecided",
]  # fmt: skip


class MissingGate(ConfigurationError):
    """No recorded gate has the id asked for."""


def new_gate_id() -> str:
    """A fresh gate id: `gate-` and 12 hex characters."""
    return f"gate-{uuid.uuid4().hex[:12]}"


def record_gate(
    store: Store, verdict: Verdict, candidate_run: str, baseline_run: str, suite_file: str
) -> str:
    """Store `verdict` (the gate of `candidate_run` against `baseline_run`); its gate id."""
    gate_id = new_gate_id()
    store.insert(
        "gates",
        [[gate_id, time.time_ns() // 1_000, verdict.suite, suite_file, candidate_run,
          baseline_run, verdict.passed, len(verdict.failed_rows), len(verdict.rows),
          verdict.seed, verdict.resamples, verdict.confidence, verdict.model_dump_json()]],
        GATE_COLUMNS,
    )  # fmt: skip
    store.insert(
        "gate_rows",
        [_row_values(gate_id, index, row) for index, row in enumerate(verdict.rows)],
        GATE_ROW_COLUMNS,
    )
    return gate_id


def _row_values(gate_id: str, index: int, row: GateRow) -> list[Any]:
    low, high = row.interval if row.interval is not None else (None, None)
    return [
        gate_id, index, row.check, row.metric, row.slice or "", row.passed, row.n_items,
        row.n_paired, row.n_unpaired, row.candidate_mean, row.baseline_mean, row.delta, low,
        high, row.threshold, row.max_regression, row.reason, row.threshold_from,
        row.max_regression_from, row.n_undecided,
    ]  # fmt: skip


def load_verdict(store: Store, gate_id: str) -> Verdict:
    """The recorded verdict of `gate_id`; MissingGate when none is recorded."""
    recorded = verdict_json(store, gate_id)
    if recorded is None:
        raise MissingGate([f"gate {gate_id!r}: not in the store"])
    return Verdict.model_validate_json(recorded)
