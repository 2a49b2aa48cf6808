"""Pieces every `pathgrade` subcommand module shares: the user-facing error and the
store arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_DATA_DIR = Path("pathgrade-data")


class CliError(Exception):
    """A message for the user, and the exit code (2: bad usage or configuration)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def store_args(parser: argparse.ArgumentParser) -> None:
    """`--data-dir` and `--clickhouse`: where the command finds the store."""
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR,
        help="embedded store and spill directory (default ./pathgrade-data)",
    )  # fmt: skip
    parser.add_argument(
        "--clickhouse", metavar="DSN|URL",
        help="a ClickHouse server (http://user:pass@host:8123/db) instead of the embedded store",
    )  # fmt: skip
