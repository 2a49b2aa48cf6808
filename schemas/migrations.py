"""The ClickHouse migrations shipped with pathgrade, as definitions: the files, the columns
retention clears and its defaults.

Each `migrations/NNNN_name.sql` file is one migration: statements separated by `;` at a
line end. The runner that applies them, records them and lays them out on a cluster is
the store room's (`batch_plane.store.migration_runner`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

CONTENT_COLUMNS = (
    "ContentAttributes", "EventContentAttributes", "GenAIToolArguments", "GenAIToolResult",
    "GenAIInputMessages", "GenAIOutputMessages",
)  # fmt: skip
"""The `spans` columns holding captured content, cleared after the content retention."""
LOG_CONTENT_COLUMNS = ("Body", "ContentAttributes")
"""The `logs` columns holding captured content (migration 0015), cleared likewise."""
SPAN_DERIVED_TTL = {
    "trace_roots": "toDateTime(ReceivedAt)", "trace_facets": "toDateTime(ReceivedAt)",
    "conversation_traces": "toDateTime(ReceivedAt)", "feedback_spans": "toDateTime(ReceivedAt)",
    "tool_spans": "toDateTime(ReceivedAt)",
}  # fmt: skip
"""The tables a view fills with rows of `spans` (migrations 0009, 0018-0020, 0022) and what their
retention counts from (the spans' receipt): kept as long as span rows (migration 0021 and
the CREATEs). Not `span_counts`: per-minute sums with no receipt time (a minute's count
would go before spans received late for it)."""
DEFAULT_CONTENT_RETENTION_DAYS = 7
DEFAULT_RETENTION_DAYS = 90
"""Migration 0010's retention: captured content, and span rows with their facts."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One shipped migration: its version, name and SQL text (checksummed whole)."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]

    def statements(self) -> list[str]:
        """The migration's statements, comments stripped, in file order."""
        body = "\n".join(
            line for line in self.sql.splitlines() if not line.lstrip().startswith("--")
        )
        return [s.strip() for s in re.split(r";\s*$", body, flags=re.M) if s.strip()]


def bundled_migrations() -> list[Migration]:
    """The migrations shipped with pathgrade, ordered by version."""
    found = []
    for entry in resources.files("pathgrade.schemas").joinpath("migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    return sorted(found, key=lambda m: m.version)
