"""A store of N spans for the read benchmarks (`bench/reads.py scale`): a seed through the
real store path, grown in SQL to any size with the seed's distributions.

The seed is the realistic mix of `bench/ingest.py` (conversations of the demo support
agent, ~5% failure or tool-error turns, each trace padded to 6-30 spans), forwarded as the
collector does on default settings (facts recorded, content dropped) and inserted by the
store writer's SQL insert (`otlp_insert.insert_messages`), its messages spread over three
tenants (6:3:1). Alerts (on each trace with a failed span and on 4% of the others, codes and
severities from the detector registry) and scores (three metrics on 10% of the traces, one
copy in 20 of them belonging to an evaluation run) are written for the seed's traces.

Growing adds copies of the seed, seed and copies kept in tables of their own
(`bench_seed_*`): `INSERT INTO spans SELECT ... FROM bench_seed CROSS JOIN` the copy
numbers, the store's own views filling their tables (`trace_roots`, `trace_facets`,
`span_counts`, `trace_times`, ...) as on any insert; each INSERT takes up to
ROWS_PER_INSERT spans of copies that land on one day, so its blocks each make one part of
that day's partition (copies of any day in one INSERT made one small part per day and
block: 148 parts of `spans` for 2M spans against 13, and ~1.8x the CPU). Copy n gets new
trace, span and conversation ids (hashes of the old and n), a tenant drawn 6:3:1 per copy
and seed tenant, and its time moved to a point of the last thirty days drawn per copy (a
copy keeps the seed's relative timing, so a conversation's turns stay minutes apart); the
alerts and scores of its traces are copied the same way.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.otlp_insert import insert_messages, pending_message
from pathgrade.detectors.registry import REGISTRY
from store_insert import forwarded_values

TENANTS = (("acme", 6), ("globex", 3), ("initech", 1))
"""Tenants and their weights (out of 10)."""
DAY_NS = 86_400 * 10**9
SPREAD_NS = 30 * DAY_NS
"""Copies land in the thirty days before the build."""
ROWS_PER_INSERT = 2_000_000
"""At most this many spans per growing INSERT (the store's memory)."""
MESSAGES_PER_INSERT = 400
ALERT_CODES = tuple(sorted(REGISTRY))[:8]
SEED_START = "(SELECT toUnixTimestamp64Nano(min(Timestamp)) FROM bench_seed)"

_WEIGHTED = "multiIf({h} % 10 < 6, 'acme', {h} % 10 < 9, 'globex', 'initech')"
_NEW_TRACE = "if(n = 0, {c}, lower(hex(MD5(concat({c}, '#', toString(n))))))"
_NEW_SPAN = (
    "if(n = 0 OR {c} = '', {c}, substring(lower(hex(MD5(concat({c}, '#', toString(n))))), 1, 16))"
)
_NEW_CONVERSATION = "if(n = 0 OR {c} = '', {c}, concat({c}, '-', toString(n)))"
_NEW_TENANT = "if(n = 0, Tenant, " + _WEIGHTED.format(h="cityHash64(n, Tenant)") + ")"
_MOVED = "fromUnixTimestamp64Nano(toUnixTimestamp64Nano({c}) + shift)"


def _tenant_of(index: int) -> str:
    slot = (index * 7919) % 10
    return "acme" if slot < 6 else "globex" if slot < 9 else "initech"


def seed(store: ClientStore, spans: int) -> int:
    """Insert about `spans` realistic spans through the store writer's SQL insert, their
    alerts and scores, and keep a copy of each in `bench_seed_*`; returns the spans stored."""
    values = forwarded_values(spans, "realistic")
    received = time.time_ns()
    for first in range(0, len(values), MESSAGES_PER_INSERT):
        batch = values[first : first + MESSAGES_PER_INSERT]
        messages = [
            pending_message(value, _tenant_of(first + i), received) for i, value in enumerate(batch)
        ]
        insert_messages(store, messages)
    command = store.client.command
    command("CREATE TABLE bench_seed ENGINE = MergeTree ORDER BY tuple() AS SELECT * FROM spans")
    codes = "[" + ", ".join(f"'{c}'" for c in ALERT_CODES) + "]"
    names = "[" + ", ".join(f"'{REGISTRY[c].name}'" for c in ALERT_CODES) + "]"
    severities = "[" + ", ".join(f"'{REGISTRY[c].severity}'" for c in ALERT_CODES) + "]"
    command(f"""
        CREATE TABLE bench_seed_alerts ENGINE = MergeTree ORDER BY tuple() AS
        SELECT Tenant, TraceId, root, agent, service, conversation, start_ns, end_ns,
            {codes}[cityHash64(TraceId) % {len(ALERT_CODES)} + 1] AS Code,
            {names}[cityHash64(TraceId) % {len(ALERT_CODES)} + 1] AS Name,
            {severities}[cityHash64(TraceId) % {len(ALERT_CODES)} + 1] AS Severity
        FROM (
            SELECT Tenant, TraceId, anyIf(SpanId, ParentSpanId = '') AS root,
                anyIf(GenAIAgentName, ParentSpanId = '') AS agent,
                any(ServiceName) AS service, max(GenAIConversationId) AS conversation,
                toUnixTimestamp64Nano(min(Timestamp)) AS start_ns,
                toUnixTimestamp64Nano(max(Timestamp)) AS end_ns,
                countIf(StatusCode = 'Error' OR GenAIErrorType != '') AS failed
            FROM bench_seed GROUP BY Tenant, TraceId
        )
        WHERE failed > 0 OR cityHash64(TraceId, 'alert') % 100 < 4
    """)
    command("""
        CREATE TABLE bench_seed_scores ENGINE = MergeTree ORDER BY tuple() AS
        SELECT Tenant, TraceId, root, Metric, start_ns
        FROM (
            SELECT Tenant, TraceId, anyIf(SpanId, ParentSpanId = '') AS root,
                toUnixTimestamp64Nano(min(Timestamp)) AS start_ns
            FROM bench_seed GROUP BY Tenant, TraceId
            HAVING cityHash64(TraceId, 'score') % 10 = 0
        )
        ARRAY JOIN ['tool_correctness', 'goal_completion', 'path_efficiency'] AS Metric
    """)
    _copy_records(store, [0], time.time_ns())
    return store.query("SELECT count() FROM bench_seed").rows[0][0]


def grow(store: ClientStore, spans: int) -> int:
    """Add copies of the seed until the store holds at least `spans` spans (bench_seed's
    rows each); returns the spans in `spans` now. Each INSERT takes copies of one day (a
    copy spans seconds), so each of its blocks writes one part into `spans` and into each
    daily view table, not one per day of the thirty."""
    seed_rows = store.query("SELECT count() FROM bench_seed").rows[0][0]
    copies = store.query("SELECT max(n) FROM bench_copies").rows
    have = copies[0][0] + 1 if copies and copies[0][0] is not None else 1
    wanted = -(-spans // seed_rows)
    per_insert = max(1, ROWS_PER_INSERT // seed_rows)
    now = time.time_ns()
    days: dict[int, list[int]] = {}
    for n, day in store.query(
        f"SELECT n, intDiv(shift + {SEED_START}, {DAY_NS}) "
        f"FROM {_shift(range(have, wanted), now)} AS copies ORDER BY n"
    ).rows:
        days.setdefault(day, []).append(n)
    for numbers in days.values():
        for first in range(0, len(numbers), per_insert):
            chunk = numbers[first : first + per_insert]
            store.client.command(_spans_copy(store, chunk, now), settings={"optimize_on_insert": 0})
            _copy_records(store, chunk, now)
    return store.query("SELECT count() FROM spans").rows[0][0]


def _shift(copies: Sequence[int], now: int) -> str:
    """A sub-query of the copy numbers `n` and the ns each copy's times move by (copy 0,
    the seed, stays)."""
    listed = ", ".join(str(n) for n in copies)
    return (
        f"(SELECT arrayJoin([{listed}]::Array(UInt64)) AS n, if(n = 0, 0, {now} - {SPREAD_NS} + "
        f"toInt64(cityHash64(n, 'day') % {SPREAD_NS}) - {SEED_START}) AS shift)"
    )


def _spans_copy(store: ClientStore, copies: Sequence[int], now: int) -> str:
    """INSERT of the seed's spans' `copies` (copy numbers)."""
    columns = store.query(
        "SELECT name FROM system.columns WHERE database = currentDatabase() "
        "AND table = 'spans' AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY position"
    ).rows
    special = {
        "TraceId": _NEW_TRACE, "SpanId": _NEW_SPAN, "ParentSpanId": _NEW_SPAN,
        "GenAIConversationId": _NEW_CONVERSATION, "Tenant": _NEW_TENANT,
        "Timestamp": _MOVED, "ReceivedAt": _MOVED,
        "Events.Timestamp": "arrayMap(t -> " + _MOVED.format(c="t") + ", {c})",
    }  # fmt: skip
    names = [name for (name,) in columns]
    selected = [special.get(name, "{c}").format(c=f"`{name}`") for name in names]
    listed = ", ".join(f"`{name}`" for name in names)
    return (
        f"INSERT INTO spans ({listed}) SELECT {', '.join(selected)} "
        f"FROM bench_seed CROSS JOIN {_shift(copies, now)} AS copies"
    )


def _copy_records(store: ClientStore, copies: Sequence[int], now: int) -> None:
    """Alerts and scores of the `copies` (copy numbers), and the copies' numbers."""
    trace = _NEW_TRACE.format(c="TraceId")
    tenant = _NEW_TENANT
    command = store.client.command
    command("CREATE TABLE IF NOT EXISTS bench_copies (n UInt64) ENGINE = MergeTree ORDER BY n")
    command(f"INSERT INTO bench_copies SELECT n FROM {_shift(copies, now)}")
    command(f"""
        INSERT INTO alerts (AlertKey, Tenant, Code, Name, Severity, Kind, Reason, TraceId,
            SpanId, Service, Agent, ConversationId, Details, Incomplete, TraceStartNs,
            TraceEndNs, DetectedAtNs, TurnSpanId)
        SELECT lower(hex(MD5(concat({trace}, Code)))), {tenant}, Code, Name, Severity,
            'violation', concat(Name, ' on this turn'), {trace}, {_NEW_SPAN.format(c="root")},
            service, agent, {_NEW_CONVERSATION.format(c="conversation")}, '{{}}', 0,
            start_ns + shift, end_ns + shift, end_ns + shift + 1500000000,
            {_NEW_SPAN.format(c="root")}
        FROM bench_seed_alerts CROSS JOIN {_shift(copies, now)} AS copies
    """)
    command(f"""
        INSERT INTO scores (ScoreId, Tenant, Metric, Value, Label, Explanation, Scorer,
            ScorerVersion, DatasetItemId, RunId, Repeat, TraceId, SpanId, CreatedAt)
        SELECT lower(hex(MD5(concat({trace}, Metric)))), {tenant}, Metric,
            (cityHash64({trace}, Metric) % 1000) / 1000, '', '', Metric, '1',
            if(n % 20 = 0, concat('item-', substring(TraceId, 1, 8)), ''),
            if(n % 20 = 0, concat('run-', toString(n)), ''), 0, {trace},
            {_NEW_SPAN.format(c="root")},
            fromUnixTimestamp64Nano(start_ns + shift + 60000000000)
        FROM bench_seed_scores CROSS JOIN {_shift(copies, now)} AS copies
    """)


def pid_rss_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (`VmRSS`) or its peak since the last reset (`VmHWM`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> None:
    """Start `VmHWM` over from the current RSS (Linux: clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def evict_files(data_dir: Path) -> int:
    """Drop the store's files from the OS page cache (posix_fadvise DONTNEED on each: only
    this store's pages, not the machine's); returns the files evicted."""
    evicted = 0
    for folder, _, names in os.walk(data_dir):  # parts merged away meanwhile are skipped
        for name in names:
            try:
                descriptor = os.open(os.path.join(folder, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
                evicted += 1
            finally:
                os.close(descriptor)
    return evicted
