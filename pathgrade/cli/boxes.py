"""The production boxes run alone: `pathgrade collector` and `pathgrade store-writer`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pathgrade.cli.support import (
    CliError,
    collector_args,
    collector_settings,
    metrics_arg,
    served_metrics,
    stop_on_signal,
    store_args,
    wait_for_signal,
)


def register(commands: Any) -> None:
    collector = commands.add_parser("collector", help="run only the collector (production box)")
    collector_args(collector)
    collector.add_argument("--kafka", metavar="HOST:PORT", required=True)
    collector.add_argument(
        "--spill-dir", type=Path, default=Path("pathgrade-spill"),
        help="local spill directory used while Kafka is unavailable",
    )  # fmt: skip
    metrics_arg(collector)
    collector.set_defaults(run=_cmd_collector)

    writer = commands.add_parser("store-writer", help="run only the store writer (production box)")
    store_args(writer)
    writer.add_argument("--kafka", metavar="HOST:PORT", required=True)
    metrics_arg(writer)
    writer.set_defaults(run=_cmd_store_writer)


def _cmd_collector(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from pathgrade.collector.service import Collector, CollectorConfig, KafkaUnavailable

    settings = {"kafka_bootstrap": args.kafka, "spill_dir": str(args.spill_dir)}
    settings.update(collector_settings(args))
    try:
        collector = Collector(CollectorConfig.model_validate(settings))
        collector.start()
    except ValidationError as exc:
        raise CliError(f"invalid collector settings: {exc}") from exc
    except (KafkaUnavailable, OSError) as exc:
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

    owner = StoreOwner(args.kafka, args.data_dir, args.clickhouse)
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
