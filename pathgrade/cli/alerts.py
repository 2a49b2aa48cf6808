"""`pathgrade alerts` (list stored alerts) and `pathgrade realtime` (the realtime plane as a
production box: consumer + alert sinks)."""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.support import (
    LOG_LINE_FORMAT,
    CliError,
    cli_store,
    log_format_arg,
    message_key_setting,
    metrics_arg,
    positive_int,
    print_line,
    realtime_settings,
    served_metrics,
    since_ns,
    stop_on_signal,
    store_args,
)
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.stack.alert_lines import AlertLineSettings

if TYPE_CHECKING:
    from pathgrade.schemas.store import Store

STATUS_EVERY_S = 2.0


def register(commands: Any) -> None:
    alerts = commands.add_parser("alerts", help="list alerts from the realtime plane")
    store_args(alerts, tenant=True)
    alerts.add_argument(
        "--since", metavar="DURATION|ISO",
        help="only alerts detected since then: 15m, 2h, 1d, or 2025-07-01T12:00:00",
    )  # fmt: skip
    alerts.add_argument("--code", metavar="PGxxx", help="only this detector code")
    alerts.add_argument("--limit", type=positive_int, default=1000)
    alerts.add_argument("--format", choices=["table", "json"], default="table")
    alerts.add_argument(
        "--follow", action="store_true",
        help="print alerts as they are stored, oldest first, until Ctrl-C: those detected "
        "since --since (default: from now on), then every new one once (--limit ignored)",
    )  # fmt: skip
    alerts.set_defaults(run=_cmd_alerts)

    realtime = commands.add_parser("realtime", help="run only the realtime plane (production box)")
    store_args(realtime)
    model_flag(
        realtime, "--kafka", RealtimeConfig, "bootstrap_servers", required=True,
        metavar="HOST:PORT",
    )  # fmt: skip
    metrics_arg(realtime)
    model_flag(realtime, "--policy", RealtimeConfig, "policy_path", metavar="FILE")
    model_flag(realtime, "--alert-webhook", RealtimeConfig, "webhook_url", metavar="URL")
    model_flag(
        realtime, "--quiet-window", RealtimeConfig, "quiet_window_s", unset=True, type=float,
        metavar="S",
    )  # fmt: skip
    realtime.add_argument(
        "--config", type=Path, metavar="FILE",
        help="realtime settings as YAML (docs/realtime.md: bounds, sampler rates, webhook "
        "retries, conversation cache, ...); the flags override it",
    )  # fmt: skip
    realtime.add_argument(
        "--no-shared-history", action="store_true",
        help="do not share conversation turns with the group's other consumers through "
        "pathgrade.turns (a lone consumer needs no sharing; without the topic, a turn only "
        "sees earlier turns this consumer evaluated)",
    )  # fmt: skip
    log_format_arg(realtime)
    model_flag(realtime, "--ui-url", AlertLineSettings, "trace_url_base", metavar="URL")
    realtime.set_defaults(run=_cmd_realtime)


def alerts_query(since: int | None, code: str | None, limit: int) -> tuple[str, dict[str, Any]]:
    """The SQL (over `alerts_view`) and parameters for `pathgrade alerts`; `since` in Unix
    nanoseconds."""
    from pathgrade.batch_plane.store.alerts import latest_statement

    if code and not re.fullmatch(r"PG\d{3}", code):
        raise CliError(f"--code: expected a detector code like PG110, got {code!r}")
    return latest_statement(since, code, limit)


def _cmd_alerts(args: argparse.Namespace) -> int:
    from pathgrade.cli.output import format_json, format_table

    since = since_ns(args.since)
    sql, parameters = alerts_query(since, args.code, args.limit)
    with cli_store(args) as store:
        if args.follow:
            _follow_alerts(args, store, since if since is not None else time.time_ns())
            return 0
        result = store.query(sql, parameters, readonly=True)
    print(format_table(result) if args.format == "table" else format_json(result))
    return 0


def _follow_alerts(args: argparse.Namespace, store: Store, since: int) -> None:
    """`pathgrade alerts --follow` from `since` (Unix ns): until SIGINT/SIGTERM."""
    from pathgrade.batch_plane.store.alerts import LISTED_COLUMNS
    from pathgrade.cli.alert_follow import follow
    from pathgrade.cli.output import format_json

    stop = stop_on_signal()
    if args.format == "table":
        print("  ".join(LISTED_COLUMNS.split(", ")), flush=True)

    def emit(result: Any) -> None:
        if args.format == "json":
            print(format_json(result), flush=True)
        else:
            print("\n".join("  ".join(str(v) for v in row) for row in result.rows), flush=True)

    follow(
        lambda sql, parameters: store.query(sql, parameters, readonly=True),
        args.code, since, emit, stop.wait,
    )  # fmt: skip


def _cmd_realtime(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import StoreUnavailable
    from pathgrade.batch_plane.store.deliveries import AlertRecords
    from pathgrade.batch_plane.store.monitors import MonitorQueries
    from pathgrade.cli.support import wait_for_signal
    from pathgrade.detectors import PolicyError
    from pathgrade.realtime_plane.plane import RealtimePlane
    from pathgrade.stack.alert_log import configure_alert_log
    from pathgrade.stack.store_access import NoStore, open_store

    settings = realtime_settings(
        args.config, policy_path=args.policy and str(args.policy),
        webhook_url=args.alert_webhook, quiet_window_s=args.quiet_window,
    )  # fmt: skip
    if args.no_shared_history:
        settings["turns_topic"] = None
    key = message_key_setting(args, args.kafka)
    if key is not None:  # else the --config file's, if any
        settings["message_key"] = key
    config = RealtimeConfig(bootstrap_servers=args.kafka, **settings)
    lines = AlertLineSettings(log_format=args.log_format, trace_url_base=args.ui_url)
    configure_alert_log(LOG_LINE_FORMAT, settings=lines)
    try:
        with open_store(args.data_dir, args.clickhouse, must_exist=False) as store:
            plane = RealtimePlane(config, AlertRecords(store), monitor_reads=MonitorQueries(store))
            plane.start()
            try:
                with served_metrics(args.metrics_listen, "realtime", plane.counters):
                    signalled = stop_on_signal()
                    print(f"realtime: {args.kafka} -> alerts ({config.group_id})", flush=True)
                    stop = threading.Event()
                    threading.Thread(target=_report, args=(plane, stop), daemon=True).start()
                    wait_for_signal(signalled)
                    stop.set()
            finally:
                plane.stop()
    except (NoStore, StoreUnavailable, PolicyError, OSError, RuntimeError) as exc:
        raise CliError(str(exc)) from exc
    print(f"realtime stopped: {_status(plane)}", flush=True)
    return 0


def _status(plane: Any) -> str:
    from pathgrade.realtime_plane.delays import DELAY_WINDOW, P50, P99

    c = plane.counters()
    failed = c["evaluation_failures"]
    return (
        f"{c['spans']} spans read, {c['traces_held']} traces / {c['spans_held']} spans "
        f"buffered, {c['traces_evaluated']} evaluated, {c['alerts']} alerts"
        + (f", {failed} traces skipped (evaluation failed; see the log)" if failed else "")
        + (
            f", detection delay p50 {c[P50]:.2f} s / p99 {c[P99]:.2f} s (last "
            f"{DELAY_WINDOW:,} traces)"
            if P99 in c
            else ""
        )
        + (
            f", conversation turns {c['turns_shared']} shared / {c['turns_received']} from "
            "other consumers"
            if c.get("turns_shared") or c.get("turns_received")
            else ""
        )
    )


def _report(plane: Any, stop: threading.Event) -> None:
    """A progress line on stderr whenever the counters moved, and a line on stdout whenever
    the group assigned this consumer other partitions."""
    last, assigned = "", ""
    while not stop.wait(STATUS_EVERY_S):
        partitions = ",".join(map(str, sorted(plane.assigned.copy()))) or "none"
        if partitions != assigned:
            print_line(f"realtime: assigned partitions {partitions}")
            assigned = partitions
        line = _status(plane)
        if line != last:
            print(f"realtime: {line}", file=sys.stderr, flush=True)
            last = line
