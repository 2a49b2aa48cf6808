"""`StackOptions`: every option of `pathgrade up`, with its default and description (the
command line's help reads them here; a light module: no I/O imports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pathgrade.stack.alert_lines import DEFAULT_LOG_FORMAT, LogFormat

STORE_MEMORY_MB = (256, 1_048_576)
"""`store_memory_mb`'s bounds: 256 MB at least (the store writer splits an insert over the
limit in halves, so any limit stores everything, but below this the engine's own start,
merges and halved inserts leave reads little room: bench/memory.py stored a 50,000-span
burst at 256 in 13 s); 1 TB at most."""
STORE_CACHE_MB = (0, 65_536)
"""`store_cache_mb`'s bounds (0: no cache)."""


class StackOptions(BaseModel):
    """Options of `pathgrade up`."""

    model_config = ConfigDict(extra="forbid")

    data_dir: Path = Field(description="the stack's data directory (store, spill, fact key)")
    kafka: str | None = Field(None, description="use this Kafka instead of the bundled broker")
    clickhouse: str | None = Field(
        None, description="use this ClickHouse instead of the embedded engine"
    )
    demo: bool = Field(False, description="also send demo agent traffic")
    demo_rate_per_s: float = Field(2.0, description="demo traces sent per second")
    demo_pages: bool = Field(
        True,
        description="with `--demo`, also fill the browser UI's runs, gates, datasets and "
        "EDGE pages in the background (docs/stack.md, The demo); `--no-demo-pages`: live "
        "traffic only",
    )
    policy: str | None = Field(None, description="detector policy YAML (docs/detectors.md)")
    alert_webhook: str | None = Field(None, description="POST each alert here as JSON")
    export: dict[str, Any] | None = Field(
        None,
        description="send every stored score and alert as an OTLP log record (`ExportConfig` "
        "fields: Evaluation results out, below); none: not sent",
    )
    collector: dict[str, Any] = Field(
        default_factory=dict, description="collector settings (`CollectorConfig` fields)"
    )
    broker_max_mb: int = Field(
        1024,
        description="swap the bundled memory-only broker for a fresh one on a new port "
        '(nothing is lost, detection goes on: "Signals and supervision") once it holds this '
        "much resident memory; 0 never swaps",
    )
    store_memory_mb: int = Field(
        1024,
        ge=STORE_MEMORY_MB[0],
        le=STORE_MEMORY_MB[1],
        description="the embedded store's memory (chDB's `max_server_memory_usage`: inserts, "
        "merges, queries and caches together; ClickHouse's default is 90% of the machine's "
        "memory): a query that would go over fails with MEMORY_LIMIT_EXCEEDED and the store "
        "goes on, an insert that would is split in halves until they fit, so nothing accepted "
        "is lost; not used with `--clickhouse`",
    )
    store_cache_mb: int = Field(
        128,
        ge=STORE_CACHE_MB[0],
        le=STORE_CACHE_MB[1],
        description="each of the embedded store's caches of marks, skip-index marks and "
        "primary keys holds at most this much (chDB's defaults: 5 GB each), within "
        "`store_memory_mb`; not used with `--clickhouse`",
    )
    store_writer_niceness: int = Field(
        19,
        description="run the store writer (and chDB's own threads) this much nicer than the "
        "rest (Linux), so alerts stay fast on a saturated machine and the store catches up "
        "after; 0 same priority",
    )
    realtime_workers: int = Field(
        1,
        description="realtime processes in the consumer group (at most the partitions of "
        "pathgrade.spans); with more than one they share conversation turns through "
        "pathgrade.turns",
    )
    realtime: dict[str, Any] = Field(
        default_factory=dict, description="realtime settings (`RealtimeConfig` fields, a file)"
    )
    status_every_s: float = Field(
        30,
        description="print a status line (spans in and stored, traces evaluated, alerts, "
        "spill, broker memory) this often when traffic moved, and serve it to `pathgrade "
        "status`; 0 never",
    )
    log_format: LogFormat = Field(
        DEFAULT_LOG_FORMAT, description="alerts in the terminal: short paced lines, or JSON"
    )
    retention: tuple[int, int] | None = Field(
        None, description="(content days, row days) of retention; none: as migrated"
    )
    metrics_listen: tuple[str, int] | None = Field(
        None,
        description="also serve the stack's metrics at http://HOST:PORT/metrics without a "
        "token, for a Prometheus you point there (the loopback endpoint's /metrics and "
        "/status need the owner's token)",
    )
