"""The `pathgrade` command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pathgrade.alert_log import configure_alert_log
from pathgrade.cli_support import (
    DEFAULT_BROKER_MAX_MB,
    DEFAULT_DATA_DIR,
    DEFAULT_STATUS_EVERY_S,
    DEFAULT_STORE_WRITER_NICENESS,
    CliError,
    cli_store,
    metrics_arg,
    realtime_settings,
    served_metrics,
    stop_on_signal,
    store_args,
)
from pathgrade.gc_schedule import schedule_full_collections
from schemas.topics import KafkaSettingsError, kafka_client_settings

LONG_RUNNING_COMMANDS = frozenset({"up", "collector", "store-writer", "realtime", "scorer"})


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if args.command in LONG_RUNNING_COMMANDS:
        schedule_full_collections()
    try:
        if getattr(args, "kafka", None):
            kafka_client_settings(args.kafka)  # a bad PATHGRADE_KAFKA_* fails before any work
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except KafkaSettingsError as exc:
        print(f"pathgrade: {exc}", file=sys.stderr)
        return 2
    except CliError as exc:
        print(f"pathgrade: {exc}", file=sys.stderr)
        return exc.exit_code


def configure_logging(verbose: bool) -> None:
    """Warnings by default; the Kafka client's connection chatter only with -v."""
    line_format = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format=line_format)
    if not verbose:
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    configure_alert_log(line_format)


def int_between(low: int, high: int, meaning: str) -> Callable[[str], int]:
    """An argparse type: an integer in low..high (`meaning` names it in the error)."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high} ({meaning}), got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pathgrade", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("up", help="run the embedded stack (collector, broker, store)")
    store_args(up)
    _collector_args(up)
    up.add_argument(
        "--kafka", metavar="HOST:PORT", help="use this Kafka instead of the bundled broker"
    )
    up.add_argument("--demo", action="store_true", help="also send demo agent traffic")
    up.add_argument("--policy", metavar="FILE", help="detector policy YAML (docs/detectors.md)")
    up.add_argument("--alert-webhook", metavar="URL", help="POST each alert here as JSON")
    up.add_argument(
        "--broker-max-mb", type=int, default=DEFAULT_BROKER_MAX_MB, metavar="MB",
        help="swap the bundled memory-only broker for a fresh one (nothing is lost) once it "
        f"holds this much resident memory; 0 never swaps (default {DEFAULT_BROKER_MAX_MB})",
    )  # fmt: skip
    up.add_argument(
        "--store-writer-nice", type=int_between(0, 19, "a nice increment"),
        default=DEFAULT_STORE_WRITER_NICENESS, metavar="N",
        help="run the store writer (and chDB's own threads) this much nicer than the rest "
        "(Linux), so alerts stay fast "
        "on a saturated machine and the store catches up after; 0 same priority "
        f"(default {DEFAULT_STORE_WRITER_NICENESS})",
    )  # fmt: skip
    up.add_argument(
        "--realtime-config", type=Path, metavar="FILE",
        help="realtime settings as YAML (docs/realtime.md); --policy and --alert-webhook "
        "override it",
    )  # fmt: skip
    up.add_argument(
        "--realtime-workers", type=int_between(1, 64, "realtime processes"), default=1,
        metavar="N",
        help="realtime processes in the consumer group (at most the partitions of "
        "pathgrade.spans); with more than one they share conversation turns through "
        "pathgrade.turns (default 1)",
    )  # fmt: skip
    up.add_argument(
        "--status-every", type=int_between(0, 86_400, "seconds"), default=DEFAULT_STATUS_EVERY_S,
        metavar="SECONDS",
        help="print a status line (spans in and stored, traces evaluated, alerts, spill, "
        "broker memory) this often when traffic moved, and serve it to `pathgrade status`; "
        f"0 never (default {DEFAULT_STATUS_EVERY_S})",
    )  # fmt: skip
    up.set_defaults(run=_cmd_up)

    status = commands.add_parser("status", help="what the running `pathgrade up` has done")
    status.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the stack's data directory"
    )
    status.add_argument("--format", choices=["table", "json"], default="table")
    status.set_defaults(run=_cmd_status)

    collector = commands.add_parser("collector", help="run only the collector (production box)")
    _collector_args(collector)
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

    demo = commands.add_parser("demo", help="send demo agent traces over OTLP")
    demo.add_argument(
        "--otlp", required=True, metavar="URL", help="http://host:4318 or grpc://host:4317"
    )
    demo.add_argument("--traces", type=int, default=50)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--flavor", choices=["genai", "openinference", "openllmetry"], default="genai"
    )
    demo.add_argument("--token", help="bearer token for the collector")
    demo.set_defaults(run=_cmd_demo)

    sql = commands.add_parser("sql", help="run a read-only query against the store")
    store_args(sql)
    sql.add_argument("--format", choices=["table", "json"], default="table")
    sql.add_argument("query", help='the SQL, e.g. "SELECT count() FROM spans"')
    sql.set_defaults(run=_cmd_sql)

    topics = commands.add_parser("topics", help="create pathgrade's Kafka topics where missing")
    topics.add_argument("--kafka", metavar="HOST:PORT", required=True)
    topics.add_argument(
        "--partitions", type=int_between(1, 10_000, "partitions"), default=None,
        help="partitions of each new topic: at least the consumers of one group (default 4)",
    )  # fmt: skip
    topics.add_argument(
        "--replication-factor", type=int_between(1, 100, "replicas"), default=1,
        help="replicas of each new topic (default 1; 3 on a production cluster)",
    )  # fmt: skip
    topics.set_defaults(run=_cmd_topics)

    migrate = commands.add_parser("migrate", help="apply the ClickHouse migrations")
    store_args(migrate)
    migrate.add_argument(
        "--cluster", metavar="NAME",
        help="a replicated ClickHouse cluster (with --clickhouse): every table ON CLUSTER "
        "with a Replicated engine; later migrations follow it",
    )  # fmt: skip
    migrate.add_argument(
        "--print-sql", action="store_true",
        help="print the DDL for an empty database instead of applying it (no store needed)",
    )  # fmt: skip
    migrate.set_defaults(run=_cmd_migrate)
    for module in command_modules():
        module.register(commands)
    return parser


def command_modules() -> list[Any]:
    """Every `pathgrade/cli_<area>.py` with a `register(commands)` function, by name."""
    import importlib
    import pkgutil

    import pathgrade

    modules = []
    for info in sorted(pkgutil.iter_modules(pathgrade.__path__), key=lambda i: i.name):
        if info.name.startswith("cli_"):
            module = importlib.import_module(f"pathgrade.{info.name}")
            if hasattr(module, "register"):
                modules.append(module)
    return modules


def _collector_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, metavar="FILE",
        help="collector settings as YAML (see README); the flags below override it",
    )  # fmt: skip
    parser.add_argument("--grpc-port", type=int, help="OTLP/gRPC port (default 4317)")
    parser.add_argument("--http-port", type=int, help="OTLP/HTTP port (default 4318)")
    parser.add_argument("--listen-host", help="address the receivers bind (default 127.0.0.1)")
    parser.add_argument("--tokens-file", type=Path, help="YAML mapping bearer token -> tenant")
    parser.add_argument("--max-body-bytes", type=int, help="decompressed request limit")
    parser.add_argument(
        "--capture-tools", metavar="NAMES",
        help="comma-separated tool names whose arguments/results are kept ('*' = all)",
    )  # fmt: skip
    parser.add_argument(
        "--capture-messages", action="store_true", default=None, help="keep message content"
    )


def _collector_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Collector config fields from --config and the flags (flags win)."""
    import yaml

    settings: dict[str, Any] = {}
    if args.config:
        try:
            loaded = yaml.safe_load(args.config.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CliError(f"{args.config}: {exc}") from exc
        if not isinstance(loaded, dict):
            raise CliError(f"{args.config}: expected a mapping of collector settings")
        settings.update(loaded)
    flags = {
        "grpc_port": args.grpc_port,
        "http_port": args.http_port,
        "listen_host": args.listen_host,
        "tokens_file": args.tokens_file and str(args.tokens_file),
        "max_body_bytes": args.max_body_bytes,
    }
    settings.update({key: value for key, value in flags.items() if value is not None})
    redaction = dict(settings.get("redaction") or {})
    if args.capture_tools is not None:
        redaction["capture_tools"] = [n.strip() for n in args.capture_tools.split(",") if n.strip()]
    if args.capture_messages is not None:
        redaction["capture_messages"] = args.capture_messages
    if redaction:
        settings["redaction"] = redaction
    return settings


def _cmd_up(args: argparse.Namespace) -> int:
    from batch_plane.store import StoreUnavailable
    from pathgrade.broker import BrokerError
    from pathgrade.ownership import DataDirBusy
    from pathgrade.stack import Stack, StackOptions

    collector = _collector_settings(args)
    if args.demo and "capture_tools" not in collector.get("redaction", {}):
        from pathgrade.demo import TOOL_EFFECTS

        # The detectors need the demo's tool arguments; they are still scrubbed.
        collector.setdefault("redaction", {})["capture_tools"] = sorted(TOOL_EFFECTS)
    realtime = realtime_settings(
        args.realtime_config, policy_path=args.policy, webhook_url=args.alert_webhook
    )
    stack = Stack(
        StackOptions(
            data_dir=args.data_dir,
            kafka=args.kafka,
            clickhouse=args.clickhouse,
            demo=args.demo,
            policy=realtime.get("policy_path"),
            alert_webhook=realtime.get("webhook_url"),
            realtime=realtime,
            collector=collector,
            broker_max_mb=args.broker_max_mb,
            store_writer_niceness=args.store_writer_nice,
            realtime_workers=args.realtime_workers,
            status_every_s=args.status_every,
        ),
        out=lambda text: print(text, flush=True),
    )
    try:
        stack.start()
    except (DataDirBusy, BrokerError, StoreUnavailable, OSError, RuntimeError) as exc:
        raise CliError(str(exc)) from exc
    stack.run_until_signalled()
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from pathgrade.query import StatusUnavailable, stack_status
    from pathgrade.status import status_report

    try:
        document = stack_status(args.data_dir.resolve())
    except StatusUnavailable as exc:
        raise CliError(str(exc)) from exc
    print(status_report(document) if args.format == "table" else json.dumps(document, indent=2))
    return 0


def _cmd_collector(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from collector.service import Collector, CollectorConfig, KafkaUnavailable

    settings = {"kafka_bootstrap": args.kafka, "spill_dir": str(args.spill_dir)}
    settings.update(_collector_settings(args))
    try:
        collector = Collector(CollectorConfig.model_validate(settings))
        collector.start()
    except ValidationError as exc:
        raise CliError(f"invalid collector settings: {exc}") from exc
    except (KafkaUnavailable, OSError) as exc:
        raise CliError(str(exc)) from exc
    try:
        with served_metrics(args.metrics_listen, "collector", collector.counters):
            print(
                f"collector: OTLP/gRPC :{collector.grpc_port}, OTLP/HTTP :{collector.http_port}",
                flush=True,
            )
            _wait_for_signal()
    finally:
        collector.stop()
    return 0


def _cmd_store_writer(args: argparse.Namespace) -> int:
    from batch_plane.store import StoreUnavailable
    from pathgrade.ownership import DataDirBusy
    from pathgrade.store_owner import StoreOwner

    owner = StoreOwner(args.kafka, args.data_dir, args.clickhouse)
    try:
        owner.start()
    except (DataDirBusy, StoreUnavailable) as exc:
        raise CliError(str(exc)) from exc
    try:
        with served_metrics(args.metrics_listen, "store_writer", owner.writer_stats):
            owner.publish_state({})
            print(f"store writer: {args.kafka} -> {owner.dsn}", flush=True)
            _wait_for_signal()
    finally:
        owner.stop()
    return 0


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM."""
    stop = stop_on_signal()
    while not stop.wait(1.0):
        pass


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathgrade.demo import DemoExportError, run_demo

    headers = {"authorization": f"Bearer {args.token}"} if args.token else None
    try:
        summary = run_demo(
            args.otlp, traces=args.traces, seed=args.seed, flavor=args.flavor, headers=headers
        )
    except (ValueError, DemoExportError) as exc:
        raise CliError(str(exc)) from exc
    print(f"sent {summary.traces} traces ({summary.spans} spans) to {args.otlp}")
    return 0


def _cmd_sql(args: argparse.Namespace) -> int:
    from pathgrade.query import format_json, format_table

    with cli_store(args) as store:
        result = store.query(args.query, readonly=True)
    print(format_table(result) if args.format == "table" else format_json(result))
    return 0


def _cmd_topics(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    from pathgrade.broker import DEFAULT_PARTITIONS, BrokerError, ensure_topics, wait_for_kafka
    from schemas.topics import ALL_TOPICS

    partitions = args.partitions or DEFAULT_PARTITIONS
    try:
        wait_for_kafka(args.kafka, timeout_s=10)
        created = ensure_topics(args.kafka, partitions, args.replication_factor)
    except (BrokerError, KafkaError) as exc:
        raise CliError(f"creating topics on {args.kafka} failed: {exc}") from exc
    existing = [t for t in ALL_TOPICS if t not in created]
    print(f"topics created: {', '.join(created) or 'none'}; "
          f"already there (left as they are): {', '.join(existing) or 'none'}")  # fmt: skip
    return 0


def _cmd_migrate(args: argparse.Namespace) -> int:
    from schemas.migrations import MIGRATIONS_TABLE, migration_ddl

    if args.print_sql:
        try:
            print(migration_ddl(args.cluster), end="")
        except ValueError as exc:
            raise CliError(f"--{exc}") from exc
        return 0
    if args.cluster:
        return _migrate_cluster(args.clickhouse, args.cluster)
    with cli_store(args, must_exist=False) as store:
        query = f"SELECT Version, Name FROM {MIGRATIONS_TABLE} FINAL ORDER BY Version"
        rows = store.query(query).rows
    print("migrations applied: " + ", ".join(f"{v:04d}_{n}" for v, n in rows))
    return 0


def _migrate_cluster(clickhouse: str | None, cluster: str) -> int:
    """`pathgrade migrate --cluster`: straight to the server, every statement ON CLUSTER."""
    from clickhouse_connect.driver.exceptions import ClickHouseError

    from batch_plane.store import StoreUnavailable, connect
    from schemas.migrations import ClusterMismatch, migrate

    if not clickhouse:
        raise CliError("--cluster needs --clickhouse URL: the embedded store is one server")
    try:
        client = connect(clickhouse)
    except StoreUnavailable as exc:
        raise CliError(str(exc)) from exc
    try:
        applied = migrate(client, cluster=cluster)
    except (ClusterMismatch, ValueError) as exc:
        raise CliError(str(exc)) from exc
    except ClickHouseError as exc:
        raise CliError(f"migrating on cluster {cluster} failed: {exc}") from exc
    finally:
        client.close()
    names = ", ".join(f"{m.version:04d}_{m.name}" for m in applied) or "none (up to date)"
    print(f"migrations applied on cluster {cluster}: {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
