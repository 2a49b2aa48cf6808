"""`pathgrade demo`: demo agent traffic over OTLP."""

from __future__ import annotations

import argparse
from typing import Any, get_args

from pathgrade.cli.reference import model_flag
from pathgrade.cli.support import CliError
from pathgrade.demo.options import DemoOptions, Flavor


def register(commands: Any) -> None:
    demo = commands.add_parser("demo", help="send demo agent traces over OTLP")
    demo.add_argument(
        "--otlp", required=True, metavar="URL", help="http://host:4318 or grpc://host:4317"
    )
    model_flag(demo, "--traces", DemoOptions, "traces", type=int)
    model_flag(demo, "--seed", DemoOptions, "seed", type=int)
    model_flag(demo, "--flavor", DemoOptions, "flavor", choices=get_args(Flavor))
    demo.add_argument("--token", help="bearer token for the collector")
    demo.set_defaults(run=_cmd_demo)


def _cmd_demo(args: argparse.Namespace) -> int:
    from pathgrade.demo.sender import DemoExportError, run_demo

    headers = {"authorization": f"Bearer {args.token}"} if args.token else None
    try:
        summary = run_demo(
            args.otlp, traces=args.traces, seed=args.seed, flavor=args.flavor, headers=headers
        )
    except (ValueError, DemoExportError) as exc:
        raise CliError(str(exc)) from exc
    print(f"sent {summary.traces} traces ({summary.spans} spans) to {args.otlp}")
    return 0
