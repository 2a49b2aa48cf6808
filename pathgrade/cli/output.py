"""How commands print query results: aligned text tables and JSON lines."""

from __future__ import annotations

import json
from typing import Any

from pathgrade.schemas.store import QueryResult


def format_table(result: QueryResult) -> str:
    """An aligned text table ("(0 rows)" alone when the store named no columns, as chDB
    does for an empty result)."""
    if not result.columns:
        return f"({len(result.rows)} rows)"
    cells = [result.columns] + [[_cell(v) for v in row] for row in result.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(result.columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''})")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def format_json(result: QueryResult) -> str:
    """One JSON object a row, keyed by column."""
    return "\n".join(json.dumps(row) for row in result.dicts())
