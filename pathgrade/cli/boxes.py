"""The production boxes run alone: `pathgrade collector`, `pathgrade store-writer` and
`pathgrade exporter`; and the collector's dead-letter file: `pathgrade dead-letter`."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.support import (
    DEFAULT_DATA_DIR,
    CliError,
    cli_store,
    collector_args,
    collector_settings,
    export_args,
    export_settings,
    message_key_setting,
    metrics_arg,
    served_metrics,
    stop_on_signal,
    store_args,
    wait_for_signal,
)
from pathgrade.collector.config import CollectorConfig


def register(commands: Any) -> None:
    collector = commands.add_parser("collector", help="run only the collector (production box)")
    collector_args(collector)
    model_flag(
        collector, "--kafka", CollectorConfig, "kafka_bootstrap", required=True,
        metavar="HOST:PORT",
    )  # fmt: skip
    collector.add_argument(
        "--spill-dir", type=Path, default=Path("pathgrade-spill"),
        help="local spill directory used while Kafka is unavailable",
    )  # fmt: skip
    model_flag(collector, "--policy", CollectorConfig, "policy", type=Path, metavar="FILE")
    metrics_arg(collector)
    collector.set_defaults(run=_cmd_collector)

    dead = commands.add_parser(
        "dead-letter",
        help="list the collector's dead-lettered messages, or re-drive them into its spill",
        description="Spilled messages Kafka refused as too large or malformed, and spill "
        "frames that could not be read, are moved to dead-letter.log in the spill directory "
        "(docs/collector.md). List them, or with --redrive append them to the spill again "
        "(the collector must be stopped; it sends them on its next start).",
    )
    where = dead.add_mutually_exclusive_group()
    where.add_argument("--spill-dir", type=Path, help="a `pathgrade collector`'s spill directory")
    where.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR,
        help="a `pathgrade up` data directory (its spill/ subdirectory; default ./pathgrade-data)",
    )  # fmt: skip
    dead.add_argument("--redrive", action="store_true", help="move them back into the spill")
    dead.add_argument("--format", choices=("table", "json"), default="table")
    dead.set_defaults(run=_cmd_dead_letter)

    writer = commands.add_parser("store-writer", help="run only the store writer (production box)")
    store_args(writer)
    model_flag(
        writer, "--kafka", StoreWriterConfig, "bootstrap_servers", required=True,
        metavar="HOST:PORT",
    )  # fmt: skip
    metrics_arg(writer)
    writer.set_defaults(run=_cmd_store_writer)

    exporter = commands.add_parser(
        "exporter",
        help="send stored scores and alerts out as OTLP log records (production box)",
        description="Reads every score and alert stored after its cursor and sends each as an "
        "OTLP log record (gen_ai.evaluation.result, pathgrade.alert) to --export-otlp, at "
        "least once, in batches, retrying while the receiver is down (docs/stack.md, "
        "Evaluation results out). Run one per endpoint.",
    )
    store_args(exporter)
    export_args(exporter)
    metrics_arg(exporter)
    exporter.set_defaults(run=_cmd_exporter)


def _cmd_collector(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from pathgrade.collector.service import Collector, KafkaUnavailable

    settings = {"kafka_bootstrap": args.kafka, "spill_dir": str(args.spill_dir)}
    settings.update(collector_settings(args))
    key = message_key_setting(args, args.kafka)
    if key is not None:  # else the --config file's, if any
        settings["message_key"] = key
    if args.policy is not None:
        settings["policy"] = str(args.policy)
    try:
        collector = Collector(CollectorConfig.model_validate(settings))
        collector.start()
    except ValidationError as exc:
        raise CliError(f"invalid collector settings: {exc}") from exc
    except (KafkaUnavailable, OSError, ValueError) as exc:  # ValueError: a bad policy file
        raise CliError(str(exc)) from exc
    try:
        with served_metrics(args.metrics_listen, "collector", collector.counters):
            signalled = stop_on_signal()
            print(
                f"collector: OTLP/gRPC :{collector.grpc_port}, OTLP/HTTP :{collector.http_port}",
                flush=True,
            )
            wait_for_signal(signalled)
    finally:
        collector.stop()
    return 0


def _cmd_store_writer(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import StoreUnavailable
    from pathgrade.stack.ownership import DataDirBusy
    from pathgrade.stack.store_owner import StoreOwner
    from pathgrade.transport.message_auth import MessageKey

    key = message_key_setting(args, args.kafka)
    owner = StoreOwner(
        args.kafka, args.data_dir, args.clickhouse, message_key=key and MessageKey.from_hex(key)
    )
    try:
        for stale in owner.claim():
            print(f"stopped {stale}, left running by an earlier pathgrade up", flush=True)
        owner.start()
    except (DataDirBusy, StoreUnavailable) as exc:
        raise CliError(str(exc)) from exc
    try:
        with served_metrics(args.metrics_listen, "store_writer", owner.writer_stats):
            owner.publish_state({})
            signalled = stop_on_signal()
            print(f"store writer: {args.kafka} -> {owner.dsn}", flush=True)
            wait_for_signal(signalled)
    finally:
        owner.stop()
    return 0


def _cmd_exporter(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from pathgrade.batch_plane.export.config import ExportConfig
    from pathgrade.batch_plane.export.exporter import ResultExporter

    settings = export_settings(args)
    if settings is None:
        raise CliError("exporter: --export-otlp URL (or --export-otlp-config FILE) is required")
    config = ExportConfig.model_validate(settings)
    with cli_store(args) as store:
        exporter = ResultExporter(config, store)
        with served_metrics(args.metrics_listen, "exporter", lambda: asdict(exporter.stats)):
            signalled = stop_on_signal()
            exporter.start()
            print(f"exporter: scores and alerts -> {exporter.where}", flush=True)
            try:
                wait_for_signal(signalled)
            finally:
                exporter.stop()
        stats = exporter.stats
    print(f"exported {stats.exported_scores} scores and {stats.exported_alerts} alerts"
          + (f"; {stats.refused} given up" if stats.refused else ""))  # fmt: skip
    return 0


def _cmd_dead_letter(args: argparse.Namespace) -> int:
    from pathgrade.collector.dead_letter import DEAD_LETTER_FILE, read_entries, redrive
    from pathgrade.collector.spill import SpillInUse

    directory = args.spill_dir or args.data_dir / "spill"
    if args.redrive:
        try:
            moved, kept = redrive(directory)
        except SpillInUse as exc:
            raise CliError(str(exc)) from exc
        print(f"re-drove {moved} messages into the spill of {directory}"
              + (f"; kept {kept} entries that are no message" if kept else ""))  # fmt: skip
        return 0
    rows = [_dead_letter_row(n, entry) for n, entry in
            enumerate(read_entries(directory / DEAD_LETTER_FILE), 1)]  # fmt: skip
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no dead-lettered messages in {directory}")
        return 0
    print(_DEAD_LETTER_LINE.format(entry="#", received_at="received", tenant="tenant",
                                   trace_id="trace", bytes="bytes", reason="reason"))  # fmt: skip
    for row in rows:
        print(_DEAD_LETTER_LINE.format(**{k: v if v != "" else "-" for k, v in row.items()}))
    return 0


_DEAD_LETTER_LINE = (
    "{entry:>4}  {received_at:<20}  {tenant:<12}  {trace_id:<32}  {bytes:>10}  {reason}"
)


def _dead_letter_row(number: int, entry: Any) -> dict[str, Any]:
    """One dead-letter entry as a listing row (message fields empty for a frame that is no
    message)."""
    message = entry.message()
    received = (
        datetime.fromtimestamp(message.received_at_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if message is not None and 0 < message.received_at_ns < 2**63
        else ""
    )
    return {
        "entry": number,
        "received_at": received,
        "tenant": message.tenant if message else "",
        "trace_id": message.key.decode(errors="replace") if message else "",
        "bytes": len(message.value) if message else len(entry.body),
        "reason": entry.reason,
    }
