"""`pathgrade monitors list|show|rules`: what the policy's monitors found (the figures the
realtime plane wrote at each tick, the same the alerts page draws), and the Prometheus
rules of their objectives (docs/monitors.md)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathgrade.cli.support import CliError, cli_store, since_ns, store_args
from pathgrade.schemas.store import QueryResult

if TYPE_CHECKING:
    from pathgrade.schemas.monitors import MonitorTick

TICK_COLUMNS = [
    "Tick", "Tenant", "Monitor", "Kind", "Scope", "State", "Figure", "Threshold", "Interval",
    "Current", "Baseline", "Items", "BaselineItems", "Window", "Episode",
]  # fmt: skip
ALERT_COLUMNS = ["Detected", "Tenant", "Scope", "State", "Severity", "Reason", "Examples"]


def register(commands: Any) -> None:
    monitors = commands.add_parser(
        "monitors", help="the policy's monitors: their latest figures, series and rules",
        description="What the monitors of the realtime plane's policy found at each "
        "evaluation (docs/monitors.md), and the Prometheus rules of their objectives.",
    )  # fmt: skip
    actions = monitors.add_subparsers(dest="action", metavar="ACTION", required=True)
    listed = actions.add_parser("list", help="every monitor and scope with its latest figures")
    store_args(listed, tenant=True)
    listed.add_argument(
        "--since", default="1h", metavar="DURATION|ISO",
        help="only monitors evaluated since then (default 1h)",
    )  # fmt: skip
    listed.add_argument("--format", choices=["table", "json"], default="table")
    listed.set_defaults(run=_cmd_list)
    show = actions.add_parser(
        "show", help="one monitor's series of figures and its latest alerts with their traces"
    )
    show.add_argument("name", help="the monitor's name in the policy")
    store_args(show, tenant=True)
    show.add_argument(
        "--since", default="6h", metavar="DURATION|ISO",
        help="the series since then (default 6h)",
    )  # fmt: skip
    show.add_argument("--format", choices=["table", "json"], default="table")
    show.set_defaults(run=_cmd_show)
    rules = actions.add_parser(
        "rules", help="Prometheus alerting rules for the policy's objectives (YAML)"
    )
    rules.add_argument("--policy", type=Path, required=True, metavar="FILE")
    rules.add_argument("--out", type=Path, metavar="FILE", help="write here (default stdout)")
    rules.set_defaults(run=_cmd_rules)


def _cmd_list(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.monitors import MonitorQueries

    with cli_store(args) as store:
        ticks = MonitorQueries(store).latest_ticks(since_ns(args.since) or 0)
    ticks.sort(key=lambda t: (t.monitor, t.tenant, t.scope))
    _print(QueryResult(TICK_COLUMNS, [], [tick_row(t) for t in ticks]), args.format)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.monitors import MonitorQueries

    start = since_ns(args.since) or 0
    with cli_store(args) as store:
        queries = MonitorQueries(store)
        series = queries.ticks(start, 2**63 - 1, args.name)
        alerts = queries.alerts(args.name, start)
    if not series and not alerts:
        raise CliError(f"monitor {args.name!r}: nothing evaluated since {args.since}")
    _print(QueryResult(TICK_COLUMNS, [], [tick_row(t) for t in series]), args.format)
    rows = [
        [_time(a.detected_at_ns), a.tenant, a.details.get("scope", ""),
         a.details.get("state", ""), a.severity, a.reason,
         " ".join(f"{e['trace_id']}/{e['span_id']}" for e in a.details.get("examples", []))]
        for a in alerts
    ]  # fmt: skip
    if args.format == "table":
        print(f"\nalerts of {args.name} since {args.since}:")
    _print(QueryResult(ALERT_COLUMNS, [], rows), args.format)
    return 0


def _cmd_rules(args: argparse.Namespace) -> int:
    from pathgrade.detectors import PolicyError, load_policy
    from pathgrade.web.monitor_rules import monitor_rules

    try:
        policy = load_policy(args.policy)
    except (PolicyError, OSError) as exc:
        raise CliError(f"--policy: {exc}") from exc
    if not policy.monitors.objectives:
        raise CliError(f"--policy: {args.policy} declares no objectives (monitors.objectives)")
    text = monitor_rules(policy.monitors, str(args.policy))
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text, encoding="utf-8")
    return 0


def tick_row(tick: MonitorTick) -> list[Any]:
    """One tick as the listed row (TICK_COLUMNS)."""
    interval = "" if tick.low is None else f"{_number(tick.low)}..{_number(tick.high)}"
    window = f"{_time(tick.window_start_ns)}..{_time(tick.window_end_ns)}"
    return [
        _time(tick.tick_ns), tick.tenant, tick.monitor, tick.kind, tick.scope, tick.state,
        _number(tick.figure), _number(tick.threshold), interval, _number(tick.current),
        _number(tick.baseline), tick.items, tick.baseline_items, window, tick.episode,
    ]  # fmt: skip


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _time(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _print(result: QueryResult, output: str) -> None:
    from pathgrade.cli.output import format_json, format_table

    print(format_table(result) if output == "table" else format_json(result))
