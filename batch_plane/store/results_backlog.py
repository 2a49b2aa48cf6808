"""What the OTLP results exporter reads and writes in the store: the scores and alerts
stored after a cursor, in the order the store took them, and each exporter's cursors.

Rows are read in the order (StoredAt, Tenant, key): StoredAt is the server's clock when
the row was inserted (migration 0013), the key the row's identity (ScoreId, AlertKey). A
row becomes readable when its insert commits, a moment after StoredAt was taken, so the
exporter reads only rows stored some seconds before the server's now (`rows_after`'s
`upto`) and recounts recent seconds to find one that committed later still
(`counts_by_second`). Texts are cut at `text_chars` characters in the query, so a page of
rows is bounded in memory whatever the table holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from pathgrade.schemas.evaluation_records import ALERT_COLUMNS, SCORE_COLUMNS
from pathgrade.schemas.store import Store

Source = Literal["scores", "alerts"]
SOURCES: tuple[Source, ...] = ("scores", "alerts")
_NS = 1_000_000_000


@dataclass(frozen=True, order=True, slots=True)
class Cursor:
    """A position in a source's order: rows after it are not delivered yet."""

    stored_at_ns: int
    tenant: str = ""
    key: str = ""


@dataclass(frozen=True, slots=True)
class StoredRow:
    """One row read from a source: its position, and its fields by column name (the
    source's columns of schemas.evaluation_records)."""

    cursor: Cursor
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Table:
    key: str
    columns: tuple[str, ...]
    select: str  # expressions in `columns` order; {chars} cuts texts


_TEXT = "substringUTF8({column}, 1, {{chars:UInt32}})"
_TABLES: dict[Source, _Table] = {
    "scores": _Table(
        "ScoreId",
        SCORE_COLUMNS,
        ", ".join([
            "Tenant", "ScoreId", _TEXT.format(column="Metric"), "Value",
            _TEXT.format(column="Label"), _TEXT.format(column="Explanation"),
            _TEXT.format(column="Scorer"), _TEXT.format(column="ScorerVersion"),
            _TEXT.format(column="JudgeModel"), _TEXT.format(column="RunId"),
            _TEXT.format(column="DatasetItemId"), "TraceId", "SpanId",
            "toUnixTimestamp64Nano(CreatedAt)", "toUnixTimestamp64Nano(StoredAt)",
        ]),
    ),
    "alerts": _Table(
        "AlertKey",
        ALERT_COLUMNS,
        ", ".join([
            "Tenant", "AlertKey", "Code", _TEXT.format(column="Name"), "Severity", "Kind",
            _TEXT.format(column="Reason"), "TraceId", "SpanId", _TEXT.format(column="Service"),
            _TEXT.format(column="Agent"), "RiskTier", _TEXT.format(column="Policy"),
            "Incomplete", "DetectedAtNs", "toUnixTimestamp64Nano(StoredAt)",
        ]),
    ),
}  # fmt: skip


class ResultsBacklog:
    """The scores and alerts tables seen by one exporter (`exporter`, its id): rows past a
    cursor, only `tenants`' (every tenant's when empty), and its saved cursors."""

    def __init__(self, store: Store, exporter: str, tenants: list[str], text_chars: int) -> None:
        self.store = store
        self.exporter = exporter
        self.tenants = tenants
        self.text_chars = text_chars

    def now_ns(self) -> int:
        """The store's clock (the one StoredAt is taken with)."""
        result = self.store.query("SELECT toUnixTimestamp64Nano(now64(9))", readonly=True)
        return int(result.rows[0][0])

    def rows_after(
        self, source: Source, after: Cursor, upto_ns: int, limit: int
    ) -> list[StoredRow]:
        """At most `limit` rows of `source` after `after`, stored at `upto_ns` or before,
        in order."""
        table = _TABLES[source]
        result = self.store.query(
            f"SELECT {table.select} FROM {source} "
            "WHERE StoredAt >= fromUnixTimestamp64Nano({after:Int64}) "
            "AND StoredAt <= fromUnixTimestamp64Nano({upto:Int64}) "
            f"AND (toUnixTimestamp64Nano(StoredAt), Tenant, {table.key}) "
            "> ({after:Int64}, {tenant:String}, {key:String})"
            f"{self._tenant_condition()} "
            f"ORDER BY StoredAt, Tenant, {table.key} LIMIT {{limit:UInt32}}",
            {
                "after": after.stored_at_ns, "upto": upto_ns, "tenant": after.tenant,
                "key": after.key, "limit": limit, "chars": self.text_chars,
                "tenants": self.tenants,
            },
            readonly=True,
        )  # fmt: skip
        rows = []
        for values in result.rows:
            fields = dict(zip(table.columns, values, strict=True))
            position = Cursor(int(fields["StoredAtNs"]), fields["Tenant"], fields[table.key])
            rows.append(StoredRow(position, fields))
        return rows

    def counts_by_second(self, source: Source, first_s: int, last_s: int) -> dict[int, int]:
        """Second -> how many rows of `source` hold a StoredAt in it, for the seconds
        `first_s`..`last_s` (Unix time)."""
        result = self.store.query(
            "SELECT intDiv(toUnixTimestamp64Nano(StoredAt), 1000000000) AS second, count() "
            f"FROM {source} WHERE StoredAt >= fromUnixTimestamp64Nano({{first:Int64}}) "
            "AND StoredAt < fromUnixTimestamp64Nano({end:Int64})"
            f"{self._tenant_condition()} GROUP BY second",
            {"first": first_s * _NS, "end": (last_s + 1) * _NS, "tenants": self.tenants},
            readonly=True,
        )
        return {int(second): int(count) for second, count in result.rows}

    def _tenant_condition(self) -> str:
        return " AND Tenant IN {tenants:Array(String)}" if self.tenants else ""

    def cursors(self) -> dict[Source, Cursor]:
        """Source -> this exporter's saved cursor (the furthest saved)."""
        result = self.store.query(
            "SELECT Source, max((StoredAtNs, RowTenant, RowKey)) FROM export_cursors "
            "WHERE Exporter = {exporter:String} GROUP BY Source",
            {"exporter": self.exporter},
            readonly=True,
        )
        return {
            source: Cursor(int(position[0]), position[1], position[2])
            for source, position in result.rows
            if source in _TABLES
        }

    def save(self, cursors: dict[Source, Cursor]) -> None:
        """Save `cursors` (a source's furthest saved cursor is the one that counts)."""
        now = time.time_ns()
        rows = [
            [self.exporter, source, cursor.stored_at_ns, cursor.tenant, cursor.key, now]
            for source, cursor in sorted(cursors.items())
        ]
        if rows:
            self.store.insert(
                "export_cursors", rows,
                ["Exporter", "Source", "StoredAtNs", "RowTenant", "RowKey", "SavedAtNs"],
            )  # fmt: skip
