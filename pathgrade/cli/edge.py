"""`pathgrade edge paths|run|report|infer|traffic|recommend`: EDGE graph evaluation from the
command line, on simulated runs, replayed conversations and production traffic."""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pathgrade.batch_plane.edge.simulation_config import SimulationConfig
from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.progress import Progress
from pathgrade.cli.suite_scoring import judge_args
from pathgrade.cli.support import (
    CliError,
    agent_tracer_provider,
    cli_store,
    positive_int,
    since_ns,
    store_args,
    validation_reason,
)
from pathgrade.schemas.store import Store

DEFAULT_OTLP = "http://127.0.0.1:4318"
WHERE_HELP = (
    "a ClickHouse boolean expression over the `spans` columns, e.g. "
    "\"ServiceName = 'car-dealer'\"; it runs read-only and may not contain `;`"
)


def register(commands: Any) -> None:
    """Add `edge` and its subcommands to the `pathgrade` parser."""
    edge = commands.add_parser(
        "edge", help="EDGE: evaluate an agent graph (paths, runs, report, production traffic)"
    )
    sub = edge.add_subparsers(dest="edge_command", required=True)

    paths = sub.add_parser("paths", help="enumerate start-to-terminal paths as scenarios")
    paths.add_argument("graph", type=Path, help="graph JSON (EDGE DSL or LangGraph to_json)")
    _max_visits(paths)
    paths.add_argument("--format", choices=["text", "json"], default="text")
    paths.add_argument(
        "--out", type=Path, default=Path("scenarios.jsonl"),
        help="where the scenarios are written, one JSON object per line (default scenarios.jsonl)",
    )  # fmt: skip
    paths.set_defaults(run=_cmd_paths)

    run = sub.add_parser("run", help="simulate users on every scenario and send the traces")
    run.add_argument("graph", type=Path, help="graph JSON (EDGE DSL or LangGraph to_json)")
    run.add_argument(
        "--agent", required=True, metavar="SPEC",
        help="module:function, path/to/file.py:function, or an http(s) URL of the agent",
    )  # fmt: skip
    run.add_argument(
        "--otlp", default=DEFAULT_OTLP, metavar="URL",
        help=f"the collector that receives the agent's spans (default {DEFAULT_OTLP})",
    )  # fmt: skip
    run.add_argument("--token", help="bearer token for the collector")
    model_flag(
        run, "--run-id", SimulationConfig, "run_id", suffix=" (default: a new edge-<hex> id)"
    )
    for flag in ("--seed", "--replays", "--variants", "--max-restarts"):
        model_flag(run, flag, SimulationConfig, flag[2:].replace("-", "_"), type=int)
    run.add_argument(
        "--user-sim", default="scripted", metavar="scripted|URL",
        help="scripted user turns, or an OpenAI-compatible base URL (key: OPENAI_API_KEY)",
    )  # fmt: skip
    run.add_argument("--user-model", default="gpt-4o-mini", help="model of the user simulator")
    run.add_argument("--temperature", type=float, default=0.7, help="user simulator temperature")
    run.add_argument(
        "--scenarios", type=Path, metavar="JSONL",
        help="run these scenarios (from `edge paths`) instead of the graph's own paths",
    )  # fmt: skip
    model_flag(run, "--suite-version", SimulationConfig, "suite_version")
    _max_visits(run)
    run.set_defaults(run=_cmd_run)

    report = sub.add_parser(
        "report", help="HTML report (+ PNG/SVG graphs) of one or several runs from the store"
    )
    report.add_argument(
        "run_ids", nargs="+", metavar="RUN_ID",
        help="EDGE runs (`edge run`) or `replay conversations` runs; several: side by side",
    )  # fmt: skip
    store_args(report, tenant=True)
    report.add_argument(
        "--graph", type=Path,
        help="graph of a `replay conversations` run (default: the one its traces imply)",
    )  # fmt: skip
    report.add_argument("--out", type=Path, default=Path("edge-report.html"))
    judge_args(report, required=False)
    report.set_defaults(run=_cmd_report)

    infer = sub.add_parser("infer", help="write the graph an agent's stored traces show")
    _traffic_args(infer, where_required=True)
    infer.add_argument("--out", type=Path, default=Path("graph.json"), help="(default graph.json)")
    infer.set_defaults(run=_cmd_infer)

    traffic = sub.add_parser(
        "traffic", help="utility, adherence and coverage of declared graphs over live traffic"
    )
    declared = traffic.add_mutually_exclusive_group(required=True)
    declared.add_argument("--graph", type=Path, help="the graph (EDGE DSL or LangGraph JSON)")
    declared.add_argument(
        "--policy", type=Path,
        help="a detector policy: every service graph it names (agent_graph), over that service",
    )  # fmt: skip
    _traffic_args(traffic, where_required=False)
    traffic.add_argument("--out", type=Path, default=Path("edge-traffic.html"))
    traffic.set_defaults(run=_cmd_traffic)

    recommend = sub.add_parser("recommend", help="likely next nodes after a node path")
    recommend.add_argument("--graph", type=Path, required=True, help="the agent graph")
    recommend.add_argument("--path", required=True, metavar="A,B,...", help="the path so far")
    source = recommend.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-run", metavar="RUN_ID", help="edge utility of an EDGE run")
    source.add_argument(
        "--since", metavar="DURATION|ISO", help="edge utility of live traffic since then (7d)"
    )
    recommend.add_argument(
        "--where", help="with --since: which traffic (default: all traces); " + WHERE_HELP
    )
    _walk_arg(recommend)
    _limit_arg(recommend)
    recommend.add_argument("--format", choices=["text", "json"], default="text")
    store_args(recommend, tenant=True)
    recommend.set_defaults(run=_cmd_recommend)


def _traffic_args(parser: argparse.ArgumentParser, where_required: bool) -> None:
    """`--where`, `--since`, `--limit`, `--walk` and the store: which stored traffic."""
    parser.add_argument("--where", required=where_required, help=WHERE_HELP)
    parser.add_argument(
        "--since", metavar="DURATION|ISO", help="only traces since then: 15m, 2h, 7d, or ISO"
    )
    _limit_arg(parser)
    _walk_arg(parser)
    store_args(parser, tenant=True)


def _limit_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit", type=positive_int,
        help="at most this many traces, oldest first (default 10,000: edge.store.TRAFFIC_LIMIT)",
    )  # fmt: skip


def _walk_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--walk", choices=["turn", "conversation"], default="turn",
        help="turn: each trace walks the graph from its start (one LangGraph run per turn); "
        "conversation: a conversation's turns continue one walk",
    )  # fmt: skip


def _max_visits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-visits", type=int, default=1, metavar="K",
        help="visits allowed per node in one path (default 1: simple paths)",
    )  # fmt: skip


def read_graph(path: Path) -> Any:
    """The validated AgentGraph in `path` (EDGE DSL, or LangGraph JSON with source/target)."""
    from pathgrade.content.graph_documents import parse_graph_document
    from pathgrade.schemas.agent_graph import GraphError

    try:
        return parse_graph_document(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"{path}: {exc}") from exc
    except (GraphError, ValidationError) as exc:
        raise CliError(f"{path}: {exc}") from exc


def _cmd_paths(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.edge.graph import (
        enumerate_paths,
        paths_document,
        scenarios,
        write_scenarios,
    )
    from pathgrade.schemas.agent_graph import GraphError

    graph = read_graph(args.graph)
    try:
        paths = enumerate_paths(graph, max_visits=args.max_visits)
    except (GraphError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    write_scenarios(scenarios(graph, paths), args.out)
    if args.format == "json":
        print(json.dumps(paths_document(paths)))
    else:
        for path in paths:
            print(" > ".join(path))
        print(f"{len(paths)} paths; scenarios written to {args.out}")
    return 0


def _load_scenarios(args: argparse.Namespace, graph: Any) -> list[Any]:
    """The scenarios to run: from --scenarios, or every path of the graph."""
    from pathgrade.batch_plane.edge.graph import Scenario, enumerate_paths, scenarios
    from pathgrade.schemas.agent_graph import GraphError

    if args.scenarios is None:
        try:
            return scenarios(graph, enumerate_paths(graph, max_visits=args.max_visits))
        except (GraphError, ValueError) as exc:
            raise CliError(str(exc)) from exc
    try:
        lines = args.scenarios.read_text(encoding="utf-8").splitlines()
        return [Scenario.model_validate_json(line) for line in lines if line.strip()]
    except OSError as exc:
        raise CliError(f"{args.scenarios}: {exc}") from exc
    except ValidationError as exc:
        raise CliError(f"{args.scenarios}: not a scenario per line: {exc}") from exc


def _user_simulator(args: argparse.Namespace) -> Any:
    from pathgrade.batch_plane.edge.simulation import OpenAIUser, ScriptedUser

    if args.user_sim == "scripted":
        return ScriptedUser()
    if not args.user_sim.startswith(("http://", "https://")):
        raise CliError(f"--user-sim: expected 'scripted' or an http(s) URL, got {args.user_sim!r}")
    return OpenAIUser(
        args.user_sim, args.user_model, args.temperature, os.environ.get("OPENAI_API_KEY")
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.agents.adapters import AdapterError, load_adapter
    from pathgrade.batch_plane.edge.simulation import (
        RunManifest,
        Simulation,
        emit_manifest,
    )

    graph = read_graph(args.graph)
    items = _load_scenarios(args, graph)
    user = _user_simulator(args)
    run_id = args.run_id or f"edge-{uuid.uuid4().hex[:12]}"
    try:
        config = SimulationConfig(
            run_id=run_id, replays=args.replays, variants=args.variants,
            max_restarts=args.max_restarts, seed=args.seed, suite_version=args.suite_version,
        )  # fmt: skip
    except ValidationError as exc:
        raise CliError(validation_reason(exc)) from exc
    provider, recorder = agent_tracer_provider(args)
    try:
        adapter = load_adapter(args.agent)
        manifest = RunManifest(
            run_id=run_id, graph=graph.to_dsl(), scenarios=items, replays=args.replays,
            variants=args.variants, max_restarts=args.max_restarts, seed=args.seed,
            agent=args.agent, user_simulator=args.user_sim,
        )  # fmt: skip
        emit_manifest(provider.get_tracer("pathgrade.edge"), manifest)
        with Progress("edge run", "conversation") as progress:
            results = Simulation(graph, adapter, user, config).run(items, progress)
        provider.force_flush()
    except AdapterError as exc:
        raise CliError(str(exc), exit_code=1) from exc
    finally:
        provider.shutdown()
    if recorder.failed_batches:
        raise CliError(
            f"sending spans to {args.otlp} failed: {recorder.failed_spans} span(s) not accepted",
            exit_code=1,
        )
    converged = sum(result.converged for result in results)
    completed = sum(result.completed for result in results)
    turns = sum(len(result.responses) for result in results)
    print(
        f"run {run_id}: {len(items)} scenarios, {len(results)} conversations, "
        f"{converged} converged (no restart), {completed} completed (restarts allowed), "
        f"{turns} agent turns; spans sent to {args.otlp}"
    )
    print(f"report: pathgrade edge report {run_id}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.edge.report import table3_text, write_report
    from pathgrade.batch_plane.edge.store import EdgeRunNotFound, rubric_consistency_judge
    from pathgrade.cli.suite_scoring import make_judge
    from pathgrade.content.graph_documents import load_graph

    graph = read_graph(args.graph) if args.graph else None
    try:
        with cli_store(args, must_exist=False) as store:
            judge = make_judge(args, store, args.judge_model) if args.judge_url else None
            try:
                grade = rubric_consistency_judge(judge) if judge else None
                runs = [_run_metrics(store, run_id, graph, grade) for run_id in args.run_ids]
            finally:
                if judge:
                    judge.close()
    except EdgeRunNotFound as exc:
        raise CliError(str(exc), exit_code=1) from exc
    written = write_report([(m, load_graph(m["graph"])) for m in runs], args.out)
    print(table3_text(runs))
    for metrics in runs:
        replay, variant, conv = metrics["replay"], metrics["variant"], metrics["convergence"]
        converged = round(conv["convergence_rate"] * conv["paths"])
        print(
            f"run {metrics['run_id']}: node trajectory consistency "
            f"{replay['node_trajectory_consistency']:.3f} (replays), "
            f"{_fmt(variant.get('node_trajectory_consistency'))} (variants); "
            f"convergence {conv['convergence_rate']:.3f} ({converged} of {conv['paths']} "
            f"conversations converged)"
        )
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


def _run_metrics(store: Store, run_id: str, graph: Any, judge: Any) -> dict[str, Any]:
    """An EDGE run's metrics, else those of a `replay conversations` run of that id."""
    from pathgrade.batch_plane.edge.store import EdgeRunNotFound, replay_run_metrics, run_metrics

    try:
        return run_metrics(store, run_id, judge)
    except EdgeRunNotFound:
        pass
    agent, items = _replayed_items(store, run_id)
    return replay_run_metrics(store, run_id, items, graph, judge, agent)


def _replayed_items(store: Store, run_id: str) -> tuple[str, list[Any]]:
    """The agent of run `run_id` and the dataset items it played, in conversation order."""
    from pathgrade.batch_plane.edge.store import EdgeRunNotFound, StoredTurn
    from pathgrade.batch_plane.evaluation.datasets import Datasets, conversation_order
    from pathgrade.batch_plane.store.runs import agent_and_datasets

    recorded = agent_and_datasets(store, run_id)
    if recorded is None:
        raise EdgeRunNotFound(f"run {run_id!r}: neither an EDGE run nor a run in the store")
    agent, versions = recorded
    datasets = Datasets(store)
    items = [item for name, v in versions.items() for item in datasets.items(f"{name}@{v}")]
    return agent, [
        StoredTurn(i.item_id, i.conversation_id or i.item_id, i.source_trace_id, i.user_message)
        for i in conversation_order(items)
    ]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _traffic(args: argparse.Namespace, store: Store, where: str) -> list[Any]:
    """The stored traces `--where`/`--since`/`--limit` select."""
    from pathgrade.batch_plane.edge.store import TRAFFIC_LIMIT, load_traffic

    return load_traffic(store, where, since_ns(args.since), args.limit or TRAFFIC_LIMIT)


def _cmd_infer(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.edge.traffic import infer_graph
    from pathgrade.content.graph_documents import graph_problems
    from pathgrade.schemas.agent_graph import AgentGraph, GraphError

    with _traffic_store(args) as store:
        traces = _traffic(args, store, args.where)
    if not traces:
        raise CliError("no stored trace matches --where/--since", exit_code=1)
    try:
        graph = infer_graph(traces, args.walk)
    except GraphError as exc:
        raise CliError(str(exc), exit_code=1) from exc
    args.out.write_text(json.dumps(graph, indent=1) + "\n", encoding="utf-8")
    for problem in graph_problems(AgentGraph.model_validate(graph)):
        print(f"warning: {problem}", file=sys.stderr)
    source = graph["inferred_from"]
    print(
        f"graph of {source['traces']} traces ({source['walks']} walks, structure "
        f"{source['structure']}): {len(graph['nodes'])} nodes, {len(graph['edges'])} edges, "
        f"start {graph['start']}, terminals {', '.join(graph['terminals'])}; "
        f"written to {args.out}"
    )
    return 0


def _policy_graphs(path: Path) -> list[tuple[str, Any]]:
    """(service, graph) for every service section of the policy that names a graph."""
    from pathgrade.detectors import PolicyError, load_policy

    try:
        policy = load_policy(path)
    except (OSError, PolicyError) as exc:
        raise CliError(f"{path}: {exc}") from exc
    services = policy.document.services  # type: ignore[attr-defined]
    found = [
        (name, section.agent_graph.graph)
        for name, section in services.items()
        if section.agent_graph is not None and section.agent_graph.graph is not None
    ]
    if not found:
        raise CliError(f"{path}: no service names a graph (agent_graph.graph)")
    return found


def _cmd_traffic(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.edge.report import write_traffic_report
    from pathgrade.batch_plane.edge.traffic import traffic_metrics
    from pathgrade.schemas.agent_graph import GraphError

    if args.policy:
        graphs = [
            (f"service {name}", graph, f"ServiceName = '{name}'")
            for name, graph in _policy_graphs(args.policy)
        ]
    else:
        graphs = [(str(args.graph), read_graph(args.graph), "1 = 1")]
    entries = []
    with _traffic_store(args) as store:
        for label, graph, scope in graphs:
            where = f"({scope}) AND ({args.where})" if args.where else scope
            traces = _traffic(args, store, where)
            try:
                metrics = traffic_metrics(graph, traces, args.walk)
            except GraphError as exc:
                print(f"{label}: {exc.problems[0]}", file=sys.stderr)
                continue
            entries.append((label, metrics, graph))
            coverage, adherence = metrics["coverage"], metrics["adherence"]
            print(
                f"{label}: {metrics['walks']} walks over {metrics['traces']} traces; coverage "
                f"{coverage['nodes']:.3f} of nodes, {coverage['edges']:.3f} of edges; "
                f"{adherence['walks_off_graph']} walks off the graph"
            )
    if not entries:
        raise CliError("no graph node span in the selected traffic", exit_code=1)
    span = f"Traffic since {args.since}" if args.since else "All stored traffic"
    written = write_traffic_report(entries, span + (f" where {args.where}" if args.where else ""),
                                   args.out)  # fmt: skip
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


def _cmd_recommend(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.edge.recommend import check_path, recommend_next
    from pathgrade.batch_plane.edge.store import EdgeRunNotFound, run_metrics
    from pathgrade.batch_plane.edge.traffic import traffic_metrics
    from pathgrade.schemas.agent_graph import GraphError

    graph = read_graph(args.graph)
    path = [node.strip() for node in args.path.split(",") if node.strip()]
    try:
        check_path(graph, path)
    except ValueError as exc:
        raise CliError(f"--{exc}") from exc
    with _traffic_store(args) as store:
        if args.from_run:
            try:
                utility = run_metrics(store, args.from_run)["utility"]
            except EdgeRunNotFound as exc:
                raise CliError(str(exc), exit_code=1) from exc
        else:
            try:
                traces = _traffic(args, store, args.where or "1 = 1")
                utility = traffic_metrics(graph, traces, args.walk)["utility"]
            except GraphError as exc:
                raise CliError(f"--since: {exc.problems[0]}", exit_code=1) from exc
    advice = recommend_next(graph, path, utility)
    if args.format == "json":
        print(json.dumps(advice))
        return 0
    print(f"after {' > '.join(path)} ({advice['traversals']} ways out of {advice['after']} seen):")
    for candidate in advice["next"]:
        intent = f"  user: {candidate['intent']}" if candidate["intent"] else ""
        when = f"  when {candidate['when']}" if candidate["when"] else ""
        print(f"  {candidate['probability']:.3f}  {candidate['node']}{intent}{when}")
    if not advice["next"]:
        print(f"  nothing observed after {advice['after']}")
    for step in advice["off_graph_steps"]:
        print(f"warning: {step['from']} -> {step['to']} is not an edge of the graph",
              file=sys.stderr)  # fmt: skip
    return 0


def _traffic_store(args: argparse.Namespace) -> AbstractContextManager[Store]:
    """The store, with a bad `--where` as a user error."""
    from pathgrade.cli.agents import store_for

    return store_for(args)
