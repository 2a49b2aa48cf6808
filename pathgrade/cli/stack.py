"""Commands of the embedded stack: `pathgrade up` and `pathgrade status`."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.support import (
    DEFAULT_DATA_DIR,
    CliError,
    collector_args,
    collector_settings,
    export_args,
    export_settings,
    int_between,
    listen_address,
    log_format_arg,
    print_line,
    realtime_settings,
    retention_args,
    retention_of,
    store_args,
)
from pathgrade.stack.options import STORE_CACHE_MB, STORE_MEMORY_MB, StackOptions


def register(commands: Any) -> None:
    up = commands.add_parser("up", help="run the embedded stack (collector, broker, store)")
    store_args(up)
    collector_args(up)
    model_flag(up, "--kafka", StackOptions, "kafka", metavar="HOST:PORT")
    model_flag(up, "--demo", StackOptions, "demo", action="store_true")
    model_flag(
        up, "--no-demo-pages", StackOptions, "demo_pages", action="store_false",
        dest="demo_pages",
    )  # fmt: skip
    retention_args(up)
    model_flag(up, "--policy", StackOptions, "policy", metavar="FILE")
    model_flag(up, "--alert-webhook", StackOptions, "alert_webhook", metavar="URL")
    export_args(up)
    model_flag(up, "--broker-max-mb", StackOptions, "broker_max_mb", type=int, metavar="MB")
    model_flag(
        up, "--store-memory-mb", StackOptions, "store_memory_mb",
        type=int_between(*STORE_MEMORY_MB, "megabytes"), metavar="MB",
    )  # fmt: skip
    model_flag(
        up, "--store-cache-mb", StackOptions, "store_cache_mb",
        type=int_between(*STORE_CACHE_MB, "megabytes"), metavar="MB",
    )  # fmt: skip
    model_flag(
        up, "--store-writer-nice", StackOptions, "store_writer_niceness",
        type=int_between(0, 19, "a nice increment"), metavar="N",
    )  # fmt: skip
    up.add_argument(
        "--realtime-config", type=Path, metavar="FILE",
        help="realtime settings as YAML (docs/realtime.md); --policy and --alert-webhook "
        "override it",
    )  # fmt: skip
    model_flag(
        up, "--realtime-workers", StackOptions, "realtime_workers",
        type=int_between(1, 64, "realtime processes"), metavar="N",
    )  # fmt: skip
    model_flag(
        up, "--status-every", StackOptions, "status_every_s",
        type=int_between(0, 86_400, "seconds"), metavar="SECONDS",
    )  # fmt: skip
    log_format_arg(up)
    model_flag(
        up, "--metrics-listen", StackOptions, "metrics_listen", type=listen_address,
        metavar="HOST:PORT",
    )  # fmt: skip
    up.set_defaults(run=_cmd_up)

    status = commands.add_parser("status", help="what the running `pathgrade up` has done")
    status.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the stack's data directory"
    )
    status.add_argument("--format", choices=["table", "json"], default="table")
    status.set_defaults(run=_cmd_status)


def _cmd_up(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import StoreUnavailable
    from pathgrade.stack.broker import BrokerError
    from pathgrade.stack.embedded import Stack
    from pathgrade.stack.options import StackOptions
    from pathgrade.stack.ownership import DataDirBusy
    from pathgrade.stack.settings import StackSettingsError

    collector = collector_settings(args)
    realtime = realtime_settings(
        args.realtime_config, policy_path=args.policy, webhook_url=args.alert_webhook
    )
    stack = Stack(
        StackOptions(
            data_dir=args.data_dir,
            kafka=args.kafka,
            clickhouse=args.clickhouse,
            demo=args.demo,
            demo_pages=args.demo_pages,
            policy=realtime.get("policy_path"),
            alert_webhook=realtime.get("webhook_url"),
            export=export_settings(args),
            realtime=realtime,
            collector=collector,
            broker_max_mb=args.broker_max_mb,
            store_memory_mb=args.store_memory_mb,
            store_cache_mb=args.store_cache_mb,
            store_writer_niceness=args.store_writer_nice,
            realtime_workers=args.realtime_workers,
            status_every_s=args.status_every,
            log_format=args.log_format,
            retention=retention_of(args),
            metrics_listen=args.metrics_listen,
        ),
        out=print_line,
    )
    try:
        stack.start()
    except (
        DataDirBusy,
        BrokerError,
        StoreUnavailable,
        StackSettingsError,
        OSError,
        RuntimeError,
    ) as exc:
        raise CliError(str(exc)) from exc
    problem = stack.run_until_signalled()
    if problem:  # stopped on its own: a supervisor must see a failure
        raise CliError(f"stopped: {problem}", exit_code=1)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from pathgrade.stack.store_access import StatusUnavailable, stack_status

    try:
        document = stack_status(args.data_dir.resolve())
    except StatusUnavailable as exc:
        raise CliError(str(exc)) from exc
    from pathgrade.stack.status import status_report  # the report's readers: only now

    if args.format == "json":
        document["age_s"] = round(time.time() - document["snapshot"]["taken_at"], 1)
        print(json.dumps(document, indent=2))
    else:
        print(status_report(document))
    return 0
