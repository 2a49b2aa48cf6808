"""The demo's rows, found by its marks (`schemas.demo_marks`) and deleted: `pathgrade demo
clean`.

Demo traces are the traces with a span marked as demo data; their spans, trace roots and
alerts go, and every score of them. Demo runs are the runs those traces belong to; their
scores, run records and the gates that compare them go. Demo datasets are the ones the
demo owns, with their items. The per-minute span counts of the minutes and services demo
spans fell in are counted again from the spans that stay, so the trace list's counts hold
no demo spans either; so are the traces of the hours demo roots fell in (`trace_counts`,
the alerts page's). Every delete is a mutation the statement waits for
(`mutations_sync = 2`), on one server or the embedded store.
"""

from __future__ import annotations

from typing import Any

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.schemas.demo_marks import DEMO_OWNER, DEMO_RESOURCE_KEY, DEMO_RESOURCE_VALUE
from pathgrade.schemas.store import ReadableStore

_DEMO_SPAN = f"ResourceAttributes['{DEMO_RESOURCE_KEY}'] = '{DEMO_RESOURCE_VALUE}'"
DEMO_TRACES = f"SELECT DISTINCT Tenant, TraceId FROM spans WHERE {_DEMO_SPAN}"
DEMO_RUNS = f"SELECT DISTINCT Tenant, EvalRunId FROM spans WHERE {_DEMO_SPAN} AND EvalRunId != ''"
DEMO_GATES = (
    f"SELECT GateId FROM gates WHERE (Tenant, CandidateRun) IN ({DEMO_RUNS}) "
    f"OR (Tenant, BaselineRun) IN ({DEMO_RUNS})"
)
DEMO_DATASETS = f"SELECT Tenant, Name, Version FROM datasets WHERE Owner = '{DEMO_OWNER}'"
_OF_DEMO_TRACES = f"(Tenant, TraceId) IN ({DEMO_TRACES})"
WHERE: tuple[tuple[str, str], ...] = (
    ("gate_rows", f"GateId IN ({DEMO_GATES})"),
    ("gates", f"GateId IN ({DEMO_GATES})"),
    ("scores", f"{_OF_DEMO_TRACES} OR (Tenant, RunId) IN ({DEMO_RUNS})"),
    ("trace_scores", f"{_OF_DEMO_TRACES} OR (Tenant, RunId) IN ({DEMO_RUNS})"),
    ("runs", f"(Tenant, RunId) IN ({DEMO_RUNS})"),
    ("alerts", _OF_DEMO_TRACES),
    ("dataset_items", f"(Tenant, Dataset, Version) IN ({DEMO_DATASETS})"),
    ("datasets", f"Owner = '{DEMO_OWNER}'"),
    ("trace_roots", _OF_DEMO_TRACES),
    ("trace_facets", _OF_DEMO_TRACES),
    ("conversation_traces", _OF_DEMO_TRACES),
    ("feedback_spans", _OF_DEMO_TRACES),
    ("tool_spans", _OF_DEMO_TRACES),
    ("trace_times", _OF_DEMO_TRACES),
    ("spans", _OF_DEMO_TRACES),
)
"""Each table with demo rows and the condition that finds them, in the order they are
deleted: what points at a demo row goes before it (the spans last, as they mark the rest)."""
_MINUTE_KEY = "(Tenant, toStartOfMinute(Timestamp), ServiceName)"
_COUNTED = (
    "SELECT Tenant, toStartOfMinute(Timestamp) AS Minute, ServiceName, GenAIAgentName, "
    "GenAIToolName, if(GenAIResponseModel != '', GenAIResponseModel, GenAIRequestModel) AS "
    "Model, count() AS Spans, countIf(ParentSpanId = '') AS Roots FROM spans "
    "WHERE {where} GROUP BY Tenant, Minute, ServiceName, GenAIAgentName, GenAIToolName, Model"
)
"""`span_counts_mv`'s query (migration 0009) over the spans `where` selects."""
_HOUR = "toStartOfHour(toDateTime(Timestamp, 'UTC'))"
_HOURS = "{hours:Array(Tuple(String, UInt32))}"
"""The (tenant, hour in Unix seconds) keys of the trace counts to count again."""


def demo_row_counts(store: ClientStore) -> dict[str, int]:
    """How many rows of each table are demo data (tables without any left out)."""
    counts = {
        table: int(store.query(f"SELECT count() FROM {table} WHERE {where}").rows[0][0])
        for table, where in WHERE
    }
    return {table: count for table, count in counts.items() if count}


def delete_demo_rows(store: ClientStore) -> dict[str, int]:
    """Delete every demo row (`WHERE`, in order) and count the span counts of the minutes
    and services, and the traces of the hours, they touched again; returns the rows deleted
    per table."""
    counts = demo_row_counts(store)
    touched = {
        "keys": [
            tuple(key)
            for key in store.query(
                "SELECT DISTINCT Tenant, toStartOfMinute(Timestamp), ServiceName FROM spans "
                f"WHERE {_OF_DEMO_TRACES}"
            ).rows
        ]
    }
    hours = {
        "hours": [
            tuple(key)
            for key in store.query(
                f"SELECT DISTINCT Tenant, toUnixTimestamp({_HOUR}) FROM trace_roots "
                f"WHERE {_OF_DEMO_TRACES}"
            ).rows
        ]
    }
    for table, where in WHERE:
        if counts.get(table):
            _delete(store, table, where)
    if hours["hours"]:
        _delete(store, "trace_counts", f"(Tenant, toUnixTimestamp(Hour)) IN {_HOURS}", hours)
        store.query(
            "INSERT INTO trace_counts SELECT Tenant, "
            f"{_HOUR} AS Hour, uniqExactState(cityHash64(TraceId)) "
            f"FROM trace_roots WHERE (Tenant, toUnixTimestamp({_HOUR})) IN {_HOURS} "
            "GROUP BY Tenant, Hour",
            hours,
        )  # migration 0025's view over the roots that stay
    if touched["keys"]:
        _delete(store, "span_counts", f"(Tenant, Minute, ServiceName) IN {_KEYS}", touched)
        recount = _COUNTED.format(where=f"{_MINUTE_KEY} IN {_KEYS}")
        store.query(f"INSERT INTO span_counts {recount}", touched)
    return counts


_KEYS = "{keys:Array(Tuple(String, DateTime, String))}"
"""The (tenant, minute, service) keys of the span counts to count again, as a parameter."""


def _delete(
    store: ClientStore, table: str, where: str, parameters: dict[str, Any] | None = None
) -> None:
    store.query(f"ALTER TABLE {table} DELETE WHERE {where} SETTINGS mutations_sync = 2", parameters)


class DemoProgress:
    """The counts `pathgrade up --demo`'s seeding waits on (`demo.pages.StoredProgress`),
    read-only."""

    def __init__(self, store: ReadableStore) -> None:
        self.store = store

    def _count(self, sql: str, parameters: dict[str, Any] | None = None) -> int:
        return int(self.store.query(sql, parameters, readonly=True).rows[0][0])

    def demo_datasets(self) -> int:
        """How many dataset versions the demo owns."""
        return self._count(
            "SELECT count() FROM datasets WHERE Owner = {owner:String}", {"owner": DEMO_OWNER}
        )

    def alerts(self) -> int:
        """How many alerts are stored."""
        return self._count("SELECT count() FROM alerts")

    def violations_of(self, trace_id: str) -> int:
        """How many violations are stored for trace `trace_id`."""
        return self._count(
            "SELECT count() FROM alerts WHERE TraceId = {trace:String} AND Kind = 'violation'",
            {"trace": trace_id},
        )

    def roots_of_run(self, run_id: str) -> int:
        """How many root spans of run `run_id` are stored."""
        return self._count(
            "SELECT count() FROM spans WHERE EvalRunId = {run:String} AND ParentSpanId = ''",
            {"run": run_id},
        )
