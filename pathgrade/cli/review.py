"""`pathgrade review list|label|export`: the review queue, reviewers' labels as human
scores, and the labelled traces as a judge calibration set (`batch_plane.scoring.review`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pathgrade.cli.support import CliError, cli_store, positive_int, since_ns, store_args

LABEL_HELP = "pathgrade review label TRACE --metric METRIC --value pass|fail|SCORE [--note TEXT]"


def register(commands: Any) -> None:
    review = commands.add_parser(
        "review", help="the review queue: label traces as human scores, export them for the judge"
    )
    actions = review.add_subparsers(dest="review_command", metavar="ACTION")

    listed = actions.add_parser(
        "list", help="traces waiting for review (negative feedback or an alert), oldest first"
    )
    store_args(listed)
    listed.add_argument("--metric", help="only traces not yet labelled for this metric")
    listed.add_argument("--tenant", help="only this tenant's traces")
    listed.add_argument("--limit", type=positive_int, default=50)
    listed.add_argument("--format", choices=["table", "json"], default="table")
    listed.set_defaults(run=_cmd_list)

    label = actions.add_parser("label", help="record a reviewer's label as a human score")
    store_args(label)
    label.add_argument("trace_id", metavar="TRACE", help="the trace id (32 hex characters)")
    label.add_argument(
        "--metric", required=True, help="the judge metric labelled, e.g. faithfulness"
    )
    label.add_argument(
        "--value", required=True,
        help="pass, fail, or a score on the metric's rubric scale (e.g. 1..4)",
    )  # fmt: skip
    label.add_argument("--note", default="", help="why: kept as the score's explanation")
    label.add_argument("--span", metavar="SPAN_ID", help="the span it is about (default: root)")
    label.add_argument("--tenant", help="the trace's tenant, when several store that trace id")
    label.set_defaults(run=_cmd_label)

    export = actions.add_parser(
        "export", help="write labelled traces as a calibration set for `judge calibrate`"
    )
    store_args(export)
    export.add_argument("--metric", required=True, help="the judge metric whose labels to export")
    export.add_argument(
        "--since", metavar="DURATION|ISO", help="only labels recorded since then: 7d, 2025-07-01"
    )
    export.add_argument("--tenant", help="only this tenant's labels")
    export.add_argument("--out", type=Path, required=True, metavar="FILE", help="JSONL to write")
    export.set_defaults(run=_cmd_export)


def _review_errors() -> type[Exception]:
    from pathgrade.batch_plane.scoring.review import ReviewError

    return ReviewError


def _cmd_list(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.scoring.review import review_queue, review_rubric
    from pathgrade.cli.output import format_table
    from pathgrade.schemas.store import QueryResult

    try:
        if args.metric:
            review_rubric(args.metric)
    except _review_errors() as exc:
        raise CliError(str(exc)) from exc
    with cli_store(args) as store:
        items = review_queue(store, args.metric, args.limit, args.tenant)
    if args.format == "json":
        for item in items:
            print(json.dumps({**vars(item), "reasons": list(item.reasons)}))
        return 0
    columns = ["started", "tenant", "trace", "service", "why"]
    rows = [
        [item.started_at, item.tenant, item.trace_id, item.service, ", ".join(item.reasons)]
        for item in items
    ]
    print(format_table(QueryResult(columns, [""] * len(columns), rows)))
    if items:
        print(f"label one: {LABEL_HELP}", file=sys.stderr)
    return 0


def _cmd_label(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.scoring.review import record_label

    with cli_store(args) as store:
        try:
            score = record_label(
                store, args.trace_id, args.metric, args.value, args.note, args.span, args.tenant
            )
        except _review_errors() as exc:
            raise CliError(str(exc)) from exc
    print(
        f"labelled trace {score.trace_id} (span {score.span_id}, tenant {score.tenant}) "
        f"{score.metric} = {score.label} (value {score.value:.2f}, {score.rubric_version}) "
        "as a human score"
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.scoring.review import calibration_set, dump_labels, review_rubric

    try:
        rubric = review_rubric(args.metric)
    except _review_errors() as exc:
        raise CliError(str(exc)) from exc
    with cli_store(args) as store:
        labels = calibration_set(store, args.metric, since_ns(args.since), args.tenant)
    if not labels:
        since = f" since {args.since}" if args.since else ""
        raise CliError(f"no human labels of {args.metric}{since} to export", exit_code=1)
    try:
        args.out.write_text(dump_labels(labels), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--out: cannot write {args.out}: {exc.strerror or exc}") from exc
    print(
        f"wrote {len(labels)} labelled traces to {args.out}; calibrate a judge with: "
        f"pathgrade judge calibrate --labels {args.out} --rubric {rubric.ref} --judge-url URL "
        "--judge-model MODEL"
    )
    return 0
