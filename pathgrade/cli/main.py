"""pathgrade: grade what LLM agents did, from their OpenTelemetry traces."""

from __future__ import annotations

import argparse
import logging
import sys

from pathgrade.cli import (
    alerts,
    boxes,
    datasets,
    demo,
    edge,
    gate,
    monitors,
    review,
    scoring,
    stack,
    store,
    ui,
)
from pathgrade.cli.parser import CommandParser
from pathgrade.cli.support import LOG_LINE_FORMAT, CliError, quiet_stdout
from pathgrade.stack.alert_log import configure_alert_log
from pathgrade.stack.gc_schedule import schedule_full_collections
from pathgrade.transport.kafka_settings import KafkaSettingsError, kafka_client_settings

LONG_RUNNING_COMMANDS = frozenset(
    {"up", "collector", "store-writer", "realtime", "scorer", "ui", "exporter"}
)
CLOSED_PIPE_EXIT = 141  # what a shell reports for a command ended by SIGPIPE
COMMAND_MODULES = (
    stack,
    boxes,
    demo,
    store,
    alerts,
    monitors,
    datasets,
    edge,
    gate,
    scoring,
    review,
    ui,
)
"""Each command group's module, in the order `pathgrade --help` lists them."""


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. Output into a pipe its reader closed (`| head`)
    ends the command quietly with CLOSED_PIPE_EXIT, as it ends other Unix tools."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    if args.command in LONG_RUNNING_COMMANDS:
        schedule_full_collections()
    try:
        if getattr(args, "kafka", None):
            kafka_client_settings(args.kafka)  # a bad PATHGRADE_KAFKA_* fails before any work
        code = int(args.run(args) or 0)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return code
    except BrokenPipeError:
        quiet_stdout()
        return CLOSED_PIPE_EXIT
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
    level = logging.DEBUG if verbose else logging.WARNING
    logging.basicConfig(level=level, format=LOG_LINE_FORMAT)
    if not verbose:
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    configure_alert_log(LOG_LINE_FORMAT)


EPILOG = (
    "Start with `pathgrade up --demo`: it runs every box on this machine with demo agent "
    "traffic and prints where to look. `pathgrade COMMAND --help` describes a command."
)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="pathgrade", description=__doc__, epilog=EPILOG)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
