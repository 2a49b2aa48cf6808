"""`pathgrade ui`: the browser UI as its own box, reading a ClickHouse server."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.support import CLICKHOUSE_ENV, CliError, listen_address
from pathgrade.web.options import UiOptions


def register(commands: Any) -> None:
    ui = commands.add_parser("ui", help="serve the browser UI over a ClickHouse server")
    ui.add_argument(
        "--clickhouse", metavar="URL", default=os.environ.get(CLICKHOUSE_ENV) or None,
        help="the ClickHouse server, as a read-only user (http://viewer:pass@host:8123/db); "
        f"default ${CLICKHOUSE_ENV}",
    )  # fmt: skip
    model_flag(ui, "--listen", UiOptions, "listen", metavar="HOST:PORT", type=listen_address)
    model_flag(ui, "--tokens-file", UiOptions, "tokens_file", type=Path, metavar="FILE")
    model_flag(
        ui, "--metrics", UiOptions, "metrics", prefix="repeatable: ", action="append",
        metavar="URL",
    )  # fmt: skip
    ui.set_defaults(run=_cmd_ui)


def _cmd_ui(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import StoreUnavailable, open_client_store
    from pathgrade.web.rendering import UiSettings
    from pathgrade.web.scraped_status import ScrapedStatus
    from pathgrade.web.server import UiServer
    from pathgrade.web.viewers import LOOPBACK_HOSTS, Viewers

    if not args.clickhouse:
        raise CliError(f"--clickhouse URL (or ${CLICKHOUSE_ENV}) is required")
    host, port = args.listen
    if args.tokens_file is None and host not in LOOPBACK_HOSTS:
        raise CliError(
            f"--listen {host}:{port}: without --tokens-file the UI shows every tenant, so it "
            "serves loopback only (127.0.0.1, ::1)"
        )
    try:
        viewers = Viewers(args.tokens_file)
    except (OSError, ValueError) as exc:
        raise CliError(f"--tokens-file: {exc}") from exc
    try:
        store = open_client_store(args.clickhouse)
    except StoreUnavailable as exc:
        raise CliError(str(exc)) from exc
    settings = UiSettings(store, viewers, status=ScrapedStatus(args.metrics))
    try:
        server = UiServer(settings, host, port)
    except OSError as exc:
        raise CliError(f"--listen {host}:{port}: {exc.strerror or exc}") from exc
    who = f"viewers from {args.tokens_file}" if args.tokens_file else "loopback, every tenant"
    print(f"pathgrade ui: {server.url}/ ({who})", flush=True)
    try:
        server.serve_forever()
    finally:
        store.close()
    return 0
