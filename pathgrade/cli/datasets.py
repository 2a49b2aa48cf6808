"""`pathgrade dataset ...`, `pathgrade triage` and `pathgrade replay [conversations]`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from pathgrade.cli.agents import agent_args, kafka_bootstrap, store_for
from pathgrade.cli.progress import Progress
from pathgrade.cli.support import CliError, message_key_setting, positive_int, store_args

WHERE_HELP = (
    "a ClickHouse boolean expression over the `spans` columns, e.g. "
    "\"SpanName = 'execute_tool issue_refund' AND StatusCode = 'Error'\"; it runs read-only "
    "against your own store and may not contain `;`"
)


def register(commands: Any) -> None:
    """Add `dataset`, `triage` and `replay` to the `pathgrade` sub-commands."""
    _register_dataset(commands)
    triage = commands.add_parser(
        "triage", help="add a failing stored trace to a regression dataset, with its lesson"
    )
    store_args(triage, tenant=True)
    triage.add_argument("trace_id", metavar="TRACE_ID")
    triage.add_argument("--to", required=True, metavar="regression/NAME", help="dataset name")
    triage.add_argument("--owner", default="", help="owner when the dataset is created")
    triage.add_argument(
        "--forbid", action="append", default=[], metavar="TOOL",
        help="also forbid this tool (repeatable); the calls the alerts point at always are",
    )  # fmt: skip
    triage.add_argument(
        "--expect", metavar="JSON",
        help='the tool calls a good answer makes, e.g. \'[{"name": "search_kb"}]\' '
        "(default: none; the failing path is never the expectation)",
    )  # fmt: skip
    triage.add_argument(
        "--input", metavar="TEXT", help="the user's message, when the collector did not capture it"
    )
    triage.set_defaults(run=_cmd_triage)
    _register_replay(commands)


def _register_dataset(commands: Any) -> None:
    dataset = commands.add_parser("dataset", help="versioned evaluation datasets")
    actions = dataset.add_subparsers(dest="action", required=True)

    def action(name: str, run: Callable[[argparse.Namespace], int], help: str) -> Any:
        parser = actions.add_parser(name, help=help)
        store_args(parser, tenant=True)
        parser.set_defaults(run=run)
        return parser

    create = action("create", _cmd_create, "start a draft (version 1, or the next version)")
    create.add_argument("name", metavar="NAME")
    _kind_owner(create)
    create.add_argument("--description", default="")
    add = action("add", _cmd_add, "add JSONL items to a draft")
    add.add_argument("ref", metavar="NAME[@VERSION]")
    add.add_argument("file", type=Path, metavar="ITEMS.jsonl")
    publish = action("publish", _cmd_publish, "publish a draft: it becomes immutable")
    publish.add_argument("ref", metavar="NAME[@VERSION]")
    action("list", _cmd_list, "every dataset version")
    show = action("show", _cmd_show, "one version and its first items")
    show.add_argument("ref", metavar="NAME[@VERSION]")
    show.add_argument("--items", type=int, default=5, help="items to print (default 5)")
    export = action("export", _cmd_export, "write a version's items as JSONL")
    export.add_argument("ref", metavar="NAME[@VERSION]")
    export.add_argument("--out", type=Path, help="file to write (default stdout)")
    imported = action("import", _cmd_import, "create a draft from a JSONL file")
    imported.add_argument("name", metavar="NAME")
    imported.add_argument("file", type=Path, metavar="ITEMS.jsonl")
    _kind_owner(imported)
    imported.add_argument("--publish", action="store_true", help="publish it right away")
    from_traces = action("from-traces", _cmd_from_traces, "add stored traces as items")
    from_traces.add_argument("name", metavar="NAME")
    from_traces.add_argument("--where", required=True, help=WHERE_HELP)
    from_traces.add_argument(
        "--limit", type=positive_int, default=1000, help="at most this many traces"
    )
    _kind_owner(from_traces)


def _kind_owner(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kind", choices=["golden", "regression", "adversarial", "benchmark"],
        help="default: regression for a regression/... name, else golden",
    )  # fmt: skip
    parser.add_argument("--owner", default="", help="team or person responsible")


def _register_replay(commands: Any) -> None:
    replay = commands.add_parser(
        "replay", help="re-publish stored traces to pathgrade.spans, or replay conversations"
    )
    store_args(replay, tenant=True)
    replay.add_argument("--where", help=WHERE_HELP)
    replay.add_argument("--rate", type=float, metavar="N", help="at most N traces a second")
    replay.add_argument("--limit", type=positive_int, help="at most this many traces")
    replay.add_argument(
        "--kafka", metavar="HOST:PORT", help="Kafka bootstrap (default: the running stack's)"
    )
    replay.set_defaults(run=_cmd_replay)
    modes = replay.add_subparsers(dest="mode")
    conversations = modes.add_parser(
        "conversations", help="replay a dataset's user turns against an agent as a new run"
    )
    store_args(conversations, tenant=True)
    conversations.add_argument("--dataset", required=True, metavar="NAME[@VERSION]")
    conversations.add_argument(
        "--repeats", type=positive_int, default=1, metavar="N",
        help="replay every conversation N times (exact replays: `pathgrade edge report RUN` "
        "then gives the EDGE determinism metrics per conversation)",
    )  # fmt: skip
    agent_args(conversations)
    conversations.set_defaults(run=_cmd_replay_conversations)


def _read_items(path: Path) -> list[Any]:
    from pathgrade.batch_plane.evaluation.datasets import DatasetError, parse_items

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return parse_items(text, str(path))
    except DatasetError as exc:
        raise CliError(str(exc)) from exc


def _describe(info: Any) -> str:
    return f"{info.ref} ({info.kind}, {info.status}, {info.items} items, owner {info.owner or '-'})"


def _kind(args: argparse.Namespace) -> str:
    """`--kind`, else what the dataset's name says (`regression/...` -> regression)."""
    return args.kind or ("regression" if args.name.startswith("regression/") else "golden")


def _cmd_create(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets

    with store_for(args) as store:
        info = Datasets(store).create(args.name, _kind(args), args.owner, args.description)
    print(f"created {_describe(info)}")
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets

    items = _read_items(args.file)
    with store_for(args) as store:
        info = Datasets(store).add(args.ref, items)
    print(f"added {len(items)} items: {_describe(info)}")
    return 0


def _cmd_publish(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets

    with store_for(args) as store:
        info = Datasets(store).publish(args.ref)
    print(f"published {_describe(info)}")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets

    items = _read_items(args.file)
    with store_for(args) as store:
        datasets = Datasets(store)
        info = datasets.create(args.name, _kind(args), args.owner)
        with Progress(f"importing {args.file}", "item") as progress:
            info = datasets.add(info.ref, items, progress)
        if args.publish:
            info = datasets.publish(info.ref)
    print(f"imported {len(items)} items: {_describe(info)}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets
    from pathgrade.cli.output import format_table
    from pathgrade.schemas.store import QueryResult

    with store_for(args) as store:
        versions = Datasets(store).versions()
    rows = [[v.name, v.version, v.kind, v.status, v.items, v.owner] for v in versions]
    columns = ["name", "version", "kind", "status", "items", "owner"]
    print(format_table(QueryResult(columns, [""] * len(columns), rows)))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets

    with store_for(args) as store:
        datasets = Datasets(store)
        info = datasets.resolve(args.ref)
        items = datasets.items(info.ref)
    print(_describe(info))
    if info.description:
        print(info.description)
    for item in items[: args.items]:
        print(item.model_dump_json())
    if len(items) > args.items:
        print(f"... {len(items) - args.items} more")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets, dump_items

    with store_for(args) as store:
        text = dump_items(Datasets(store).items(args.ref))
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {text.count(chr(10))} items to {args.out}", file=sys.stderr)
    return 0


def _draft(datasets: Any, name: str, kind: str, owner: str) -> Any:
    """The draft of `name`, created (or the next version started) when there is none."""
    versions = datasets.versions(name)
    if versions and versions[-1].status == "draft":
        return versions[-1]
    return datasets.create(name, kind, owner)


def _cmd_from_traces(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets, items_from_traces

    kind = _kind(args)
    with store_for(args) as store:
        items, skipped = items_from_traces(store, args.where, args.limit, kind)
        for problem in skipped:
            print(f"skipped: {problem}", file=sys.stderr)
        if not items:
            raise CliError("no stored trace matches --where (with a lesson to learn)", exit_code=1)
        datasets = Datasets(store)
        info = datasets.add(_draft(datasets, args.name, kind, args.owner).ref, items)
    print(f"added {len(items)} traces as items: {_describe(info)}")
    return 0


def _cmd_triage(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import triage

    expected = _expected_calls(args.expect)
    with store_for(args) as store:
        info = triage(store, args.trace_id, args.to, args.owner, expected, args.forbid, args.input)
    print(f"triaged {args.trace_id} into {_describe(info)}")
    return 0


def _expected_calls(text: str | None) -> list[dict[str, Any]]:
    """`--expect`: a JSON list of tool calls, each with a non-empty `name`."""
    import json

    if text is None:
        return []
    try:
        calls = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--expect: not JSON: {exc.msg}") from exc
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] for c in calls
    ):
        raise CliError('--expect: expected a JSON list of calls like [{"name": "search_kb"}]')
    return calls


def _cmd_replay(args: argparse.Namespace) -> int:
    from kafka.errors import KafkaError

    from pathgrade.batch_plane.evaluation.replay import ACK_TIMEOUT_S, replay_traces
    from pathgrade.batch_plane.store.trace_rows import find_trace_ids
    from pathgrade.collector.publisher import producer_for
    from pathgrade.stack.ownership import broker_lease
    from pathgrade.transport.message_auth import MessageKey
    from pathgrade.transport.signing import signing

    if not args.where:
        raise CliError("replay: --where is required (or use `pathgrade replay conversations`)")
    if args.rate is not None and args.rate <= 0:
        raise CliError(f"--rate: must be positive, got {args.rate}")
    bootstrap = kafka_bootstrap(args)
    with store_for(args) as store:
        trace_ids = find_trace_ids(store, args.where, args.limit)
        if not trace_ids:
            raise CliError("no stored trace matches --where", exit_code=1)
        # Into a running stack's broker: never while the stack swaps it for a fresh one.
        lease = nullcontext() if args.kafka else broker_lease(args.data_dir.resolve(), False)
        with lease:
            key = message_key_setting(args, bootstrap)
            try:
                producer = signing(
                    producer_for(bootstrap, ACK_TIMEOUT_S), key and MessageKey.from_hex(key)
                )
            except KafkaError as exc:
                raise CliError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
            try:
                with Progress("replay", "trace") as progress:
                    summary = replay_traces(
                        store, producer, trace_ids, rate_per_s=args.rate, progress=progress
                    )
            except KafkaError as exc:
                raise CliError(f"Kafka did not accept the replay: {exc}", exit_code=1) from exc
            finally:
                producer.close()
    print(
        f"replayed {summary.traces} traces ({summary.spans} spans) to pathgrade.spans "
        f"in {summary.elapsed_s:.1f} s"
    )
    return 0


def _cmd_replay_conversations(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets, conversation_order, parse_ref
    from pathgrade.batch_plane.evaluation.runs import RunRecord, new_run_id
    from pathgrade.cli.agents import run_agent

    with store_for(args) as store:
        datasets = Datasets(store)
        info = datasets.resolve(args.dataset)
        items = conversation_order(datasets.items(info.ref))
        run = RunRecord(
            run_id=args.run_id or new_run_id(),
            suite=f"replay:{parse_ref(args.dataset)[0]}",
            agent=args.agent,
            dataset_versions={info.name: info.version},
            params={"mode": "replay conversations", "repeats": args.repeats},
        )
        return run_agent(args, store, items, run, runs_per_item=args.repeats, conversations=True)
