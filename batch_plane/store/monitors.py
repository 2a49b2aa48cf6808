"""Typed queries of the monitors' tables: the rollups a tick sums (`monitor_rollups`), the
ticks the alerts page and `pathgrade monitors` draw (`monitor_ticks`), and the episodes of
the monitor alerts stored in `alerts` (the latest record per monitor and scope).

`MonitorQueries` is what the realtime plane's monitor evaluator reads through (its
`MonitorReads` protocol): the plane never writes SQL for it. Every read of the rollups is
a range of buckets of one source and counter names, never a scan of the turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pathgrade.schemas.monitors import (
    EPISODE,
    MONITOR_TICK_COLUMNS,
    OPENED_NS,
    SCOPE,
    STATE,
    BucketCount,
    EpisodeRecord,
    MonitorTick,
    RollupSelection,
)
from pathgrade.schemas.store import Store

SPLIT_COLUMNS = {"service": "Service", "agent": "Agent"}
"""Splits by a column of the rollups (SPLIT_DIMENSIONS); any other is a slice's name."""


def _conditions(selection: RollupSelection) -> tuple[list[str], dict[str, Any]]:
    """The WHERE conditions of a selection besides the time range, and their parameters."""
    where = ["Source = {source:String}", "Name IN {names:Array(String)}"]
    values: dict[str, Any] = {"source": selection.source, "names": list(selection.names)}
    for column, value in (("Service", selection.service), ("Agent", selection.agent)):
        if value is not None:
            where.append(f"{column} = {{{column.lower()}:String}}")
            values[column.lower()] = value
    if selection.split is None or selection.split in SPLIT_COLUMNS:
        where.append("Slice = ''")
    else:
        where.append("startsWith(Slice, {prefix:String})")
        values["prefix"] = f"{selection.split}="
    return where, values


def _scope(selection: RollupSelection) -> str:
    """The SQL of a row's scope: '' unsplit, `service=...`, `agent=...` or its Slice."""
    if selection.split is None:
        return "''"
    if selection.split in SPLIT_COLUMNS:
        return f"concat('{selection.split}=', {SPLIT_COLUMNS[selection.split]})"
    return "Slice"


_TIME_RANGE = (
    "BucketStart >= toDateTime({start:Int64}, 'UTC') "
    "AND BucketStart < toDateTime({end:Int64}, 'UTC')"
)


class MonitorQueries:
    """The monitors' reads and the ticks' writes over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def bucket_counts(
        self, selection: RollupSelection, start_s: int, end_s: int
    ) -> list[BucketCount]:
        """The summed counts of the selected counters per tenant, scope, counter, bucket
        and value, over buckets starting in [start_s, end_s)."""
        where, values = _conditions(selection)
        result = self.store.query(
            f"SELECT Tenant, {_scope(selection)} AS Scope, Name, toUnixTimestamp(BucketStart) "
            f"AS Bucket, Value, sum(Count) FROM monitor_rollups WHERE {' AND '.join(where)} "
            f"AND {_TIME_RANGE} GROUP BY Tenant, Scope, Name, Bucket, Value",
            {**values, "start": start_s, "end": end_s},
            readonly=True,
        )
        return [
            BucketCount(tenant, scope, name, int(bucket), float(value), int(count))
            for tenant, scope, name, bucket, value, count in result.rows
        ]

    def examples(
        self,
        selection: RollupSelection,
        tenant: str,
        scope: str,
        start_s: int,
        end_s: int,
        limit: int,
    ) -> list[tuple[str, str]]:
        """Up to `limit` (trace id, span id) of turns counted in the selection for one tenant
        and scope over [start_s, end_s): the lowest values first (a score's worst), then the
        latest buckets."""
        where, values = _conditions(selection)
        result = self.store.query(
            f"SELECT Example FROM (SELECT arrayJoin(Examples) AS Example, Value, BucketStart "
            f"FROM monitor_rollups WHERE {' AND '.join(where)} AND {_TIME_RANGE} "
            f"AND Tenant = {{tenant:String}} AND {_scope(selection)} = {{scope:String}}) "
            "ORDER BY Value, BucketStart DESC, Example LIMIT 1 BY Example LIMIT {limit:UInt32}",
            {**values, "start": start_s, "end": end_s, "tenant": tenant, "scope": scope,
             "limit": limit},
            readonly=True,
        )  # fmt: skip
        return [tuple(row[0].split("/", 1)) for row in result.rows]  # type: ignore[misc]

    def episodes(self) -> list[EpisodeRecord]:
        """The latest stored monitor alert of every (tenant, monitor, scope)."""
        result = self.store.query(
            f"SELECT Tenant, Name, JSONExtractString(Details, '{SCOPE}') AS Scope, "
            f"argMax(JSONExtractString(Details, '{STATE}'), DetectedAtNs), "
            f"argMax(JSONExtractString(Details, '{EPISODE}'), DetectedAtNs), "
            f"argMax(JSONExtractInt(Details, '{OPENED_NS}'), DetectedAtNs), "
            "argMax(AlertKey, DetectedAtNs) FROM alerts FINAL WHERE Kind = 'monitor' "
            "GROUP BY Tenant, Name, Scope",
            readonly=True,
        )
        return [
            EpisodeRecord(tenant, monitor, scope, state, episode, int(opened), key)
            for tenant, monitor, scope, state, episode, opened, key in result.rows
        ]

    def alerts(self, monitor: str, since_ns: int, limit: int = 50) -> list[Alert]:
        """One monitor's alerts detected since `since_ns`, newest first."""
        result = self.store.query(
            f"SELECT {', '.join(ALERT_COLUMNS)} FROM alerts FINAL WHERE Kind = 'monitor' "
            "AND Name = {monitor:String} AND DetectedAtNs >= {since:Int64} "
            "ORDER BY DetectedAtNs DESC, AlertKey LIMIT {limit:UInt32}",
            {"monitor": monitor, "since": since_ns, "limit": limit},
            readonly=True,
        )
        return [Alert.from_row(row) for row in result.rows]

    def write_ticks(self, ticks: Iterable[MonitorTick]) -> None:
        rows = [tick.row() for tick in ticks]
        if rows:
            self.store.insert("monitor_ticks", rows, list(MONITOR_TICK_COLUMNS))

    def latest_ticks(self, since_ns: int, monitor: str | None = None) -> list[MonitorTick]:
        """The latest tick since `since_ns` of every (tenant, monitor, scope), or of one
        monitor's scopes."""
        where = ["TickNs >= {since:Int64}"]
        values: dict[str, Any] = {"since": since_ns}
        if monitor is not None:
            where.append("Monitor = {monitor:String}")
            values["monitor"] = monitor
        return self._ticks(
            f"WHERE {' AND '.join(where)} ORDER BY TickNs DESC LIMIT 1 BY Tenant, Monitor, Scope",
            values,
        )

    def ticks(
        self, start_ns: int, end_ns: int, monitor: str | None = None, limit: int = 20_000
    ) -> list[MonitorTick]:
        """The ticks over [start_ns, end_ns) of every monitor or of one, oldest first (the
        newest `limit`)."""
        where = ["TickNs >= {start:Int64}", "TickNs < {end:Int64}"]
        values: dict[str, Any] = {"start": start_ns, "end": end_ns, "limit": limit}
        if monitor is not None:
            where.append("Monitor = {monitor:String}")
            values["monitor"] = monitor
        found = self._ticks(
            f"WHERE {' AND '.join(where)} ORDER BY TickNs DESC LIMIT {{limit:UInt32}}", values
        )
        return sorted(found, key=lambda tick: (tick.tick_ns, tick.monitor, tick.tenant, tick.scope))

    def _ticks(self, rest: str, values: dict[str, Any]) -> list[MonitorTick]:
        result = self.store.query(
            f"SELECT {', '.join(MONITOR_TICK_COLUMNS)} FROM monitor_ticks FINAL {rest}",
            values,
            readonly=True,
        )
        return [MonitorTick.from_row(row) for row in result.dicts()]
