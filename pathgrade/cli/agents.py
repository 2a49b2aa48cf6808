"""Reaching the agent under test and the store from a command: `--agent` and its
neighbours, the store with dataset errors as user errors, the broker, one run of an agent
(shared by `eval`, `replay conversations` and the dataset commands)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pathgrade.cli.progress import Progress
from pathgrade.cli.support import (
    FACTS_KEY_ENV,
    CliError,
    agent_tracer_provider,
    cli_store,
    fact_secret,
)
from pathgrade.content.fingerprints import KEY_FILE_NAME
from pathgrade.schemas.store import Store


def agent_args(parser: argparse.ArgumentParser) -> None:
    """`--agent`, `--agent-state`, `--otlp`, `--token`, `--run-id`, `--trace-timeout`: how
    a run reaches the agent (and its sandbox's state) and where an in-process agent's spans
    go."""
    parser.add_argument(
        "--agent", required=True,
        help="the agent: module:function, path/to/file.py:function or an http(s) URL",
    )  # fmt: skip
    parser.add_argument(
        "--agent-state", metavar="URL",
        help="with an http(s) agent: the endpoint that returns its sandbox's state after an "
        "attempt, for items with end-state expectations (an in-process agent's end_state "
        "method needs none)",
    )  # fmt: skip
    parser.add_argument(
        "--otlp", metavar="URL",
        help="where an in-process agent exports spans (default: the running stack's OTLP/HTTP)",
    )  # fmt: skip
    parser.add_argument("--token", help="bearer token for the collector")
    parser.add_argument("--run-id", help="id of the new run (default run-<hex>)")
    parser.add_argument(
        "--trace-timeout", type=float, default=60.0, help="seconds to wait for the run's traces"
    )
    parser.add_argument(
        "--facts-key-file", type=Path, metavar="FILE",
        help="the deployment's fact secret, to compare the expected arguments with the "
        f"fingerprints of uncaptured ones (default: the data directory's {KEY_FILE_NAME}, "
        f"else ${FACTS_KEY_ENV})",
    )  # fmt: skip


@contextmanager
def store_for(args: argparse.Namespace) -> Iterator[Store]:
    """The store of `--data-dir`/`--clickhouse` (an embedded one is created and migrated
    when the directory has none, as `migrate` does), with store and dataset errors as
    CliErrors."""
    from pathgrade.batch_plane.evaluation.datasets import DatasetError
    from pathgrade.batch_plane.store.trace_rows import FilterError

    try:
        with cli_store(args, must_exist=False) as store:
            yield store
    except FilterError as exc:
        raise CliError(str(exc)) from exc
    except DatasetError as exc:
        raise CliError(str(exc), exit_code=1) from exc


def kafka_bootstrap(args: argparse.Namespace) -> str:
    """`--kafka`, else the running stack's broker."""
    from pathgrade.stack.broker_follow import stack_broker

    bootstrap = args.kafka or stack_broker(args.data_dir)
    if bootstrap is None:
        raise CliError(f"no running stack at {args.data_dir}: start one or pass --kafka")
    return str(bootstrap)


def run_agent(
    args: argparse.Namespace,
    store: Store,
    items: Sequence[Any],
    run: Any,
    runs_per_item: int,
    conversations: bool = False,
    policy: Any = None,
    judge: Any = None,
) -> int:
    """Drive the agent over `items` as run `run`, score it (detectors under `policy`,
    default every detector on; `judge` grades the retrieval of items without reference
    contexts) and print the summary; exit 0 when every attempt was answered and traced,
    else 1."""
    from pathgrade.batch_plane.agents.adapters import AdapterError, load_adapter
    from pathgrade.batch_plane.evaluation.runs import run_eval
    from pathgrade.stack.ownership import read_state

    try:
        adapter = load_adapter(args.agent, state_url=args.agent_state)
    except AdapterError as exc:
        raise CliError(str(exc)) from exc
    if not args.otlp:
        state = read_state(args.data_dir.resolve()) or {}
        if not state.get("http_port"):
            raise CliError(f"--otlp: no running stack at {args.data_dir} to send spans to")
        args.otlp = f"http://127.0.0.1:{state['http_port']}"
    provider, recorder = agent_tracer_provider(args)
    print(f"run {run.run_id}: {len(items)} items x {runs_per_item}", file=sys.stderr)
    with Progress("eval", "attempt") as progress:
        summary = run_eval(
            store, adapter, items, run, runs_per_item,
            trace_timeout_s=args.trace_timeout, progress=progress,
            flush=provider.force_flush, conversations=conversations, policy=policy,
            secret=fact_secret(args), judge=judge,
        )  # fmt: skip
    provider.shutdown()
    for error in summary.errors:
        print(f"  {error}", file=sys.stderr)
    if recorder.failed_batches:  # the cause of traces never stored
        print(f"  sending spans to {args.otlp} failed: {recorder.failed_spans} span(s) in "
              f"{recorder.failed_batches} batch(es) not accepted", file=sys.stderr)  # fmt: skip
    print(
        f"run {run.run_id} {run.status}: {summary.attempts} attempts, {summary.traces} traces, "
        f"{summary.scores} scores"
    )
    return 0 if run.status == "finished" else 1
