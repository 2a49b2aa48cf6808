"""`pathgrade demo`: demo agent traffic over OTLP; `pathgrade demo clean`: delete every row
and file the demo made."""

from __future__ import annotations

import argparse
import shutil
from typing import Any, get_args

from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.support import CliError, cli_store, store_args
from pathgrade.demo.options import DemoOptions, Flavor


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="send demo agent traces over OTLP; `demo clean` deletes the demo's data"
    )
    demo.add_argument("--otlp", metavar="URL", help="http://host:4318 or grpc://host:4317")
    model_flag(demo, "--traces", DemoOptions, "traces", type=int)
    model_flag(demo, "--seed", DemoOptions, "seed", type=int)
    model_flag(demo, "--flavor", DemoOptions, "flavor", choices=get_args(Flavor))
    demo.add_argument("--token", help="bearer token for the collector")
    demo.set_defaults(run=_cmd_demo)
    sub = demo.add_subparsers(dest="demo_command", metavar="clean")
    clean = sub.add_parser(
        "clean",
        help="delete everything the demo created (its traffic, alerts, scores, runs, gates, "
        "datasets and files), with the stack stopped",
    )
    store_args(clean)
    clean.add_argument(
        "--dry-run", action="store_true", help="count the demo's rows per table, delete nothing"
    )
    clean.set_defaults(run=_cmd_clean)


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathgrade.demo.sender import DemoExportError, run_demo

    if not args.otlp:
        raise CliError("--otlp URL is required to send demo traffic (or: pathgrade demo clean)")
    headers = {"authorization": f"Bearer {args.token}"} if args.token else None
    try:
        summary = run_demo(
            args.otlp, traces=args.traces, seed=args.seed, flavor=args.flavor, headers=headers
        )
    except (ValueError, DemoExportError) as exc:
        raise CliError(str(exc)) from exc
    print(f"sent {summary.traces} traces ({summary.spans} spans) to {args.otlp}")
    return 0


def _cmd_clean(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.client import ClientStore
    from pathgrade.batch_plane.store.demo_rows import delete_demo_rows, demo_row_counts
    from pathgrade.demo.pages import demo_files

    with cli_store(args) as store:
        if not isinstance(store, ClientStore):
            raise CliError(
                f"a running `pathgrade up` owns the store in {args.data_dir}: stop it "
                "(Ctrl-C), then run `pathgrade demo clean` again"
            )
        counts = demo_row_counts(store) if args.dry_run else delete_demo_rows(store)
    files = None if args.clickhouse else demo_files(args.data_dir)
    found = ", ".join(f"{table} {count:,}" for table, count in counts.items())
    if args.dry_run:
        print(f"demo rows: {found or 'none'}" + (f"; demo files in {files}" if files else ""))
        return 0
    if files:
        shutil.rmtree(files)
    print(
        f"deleted the demo's rows ({found or 'none'})"
        + (f" and its files ({files})" if files else "")
        + "; everything else is kept"
    )
    return 0
