"""`pathgrade edge paths|run|report`: EDGE graph evaluation from the command line."""

from __future__ import annotations

import argparse
import json
import os
import uuid
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pathgrade.cli.progress import Progress
from pathgrade.cli.suite_scoring import judge_args
from pathgrade.cli.support import (
    CliError,
    agent_tracer_provider,
    cli_store,
    store_args,
)

DEFAULT_OTLP = "http://127.0.0.1:4318"


def register(commands: Any) -> None:
    """Add `edge` and its subcommands to the `pathgrade` parser."""
    edge = commands.add_parser("edge", help="EDGE: evaluate an agent graph (paths, runs, report)")
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
    run.add_argument("--run-id", help="id written on every span (default: a new edge-<hex> id)")
    run.add_argument("--seed", type=int, default=0, help="seed of the user and agent draws")
    run.add_argument("--replays", type=int, default=3, help="exact replays per scenario (R)")
    run.add_argument("--variants", type=int, default=2, help="persona variants per scenario (V)")
    run.add_argument("--max-restarts", type=int, default=2, help="restarts after a deviation (B)")
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
    run.add_argument("--suite-version", default="", help="value of pathgrade.suite.version")
    _max_visits(run)
    run.set_defaults(run=_cmd_run)

    report = sub.add_parser("report", help="HTML report (+ PNG/SVG graph) of a run from the store")
    report.add_argument("run_id", metavar="RUN_ID")
    store_args(report)
    report.add_argument("--out", type=Path, default=Path("edge-report.html"))
    judge_args(report, required=False)
    report.set_defaults(run=_cmd_report)


def _max_visits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-visits", type=int, default=1, metavar="K",
        help="visits allowed per node in one path (default 1: simple paths)",
    )  # fmt: skip


def read_graph(path: Path) -> Any:
    """The validated AgentGraph in `path` (EDGE DSL, or LangGraph JSON with source/target)."""
    from pathgrade.schemas.agent_graph import GraphError, parse_graph_document

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
        SimulationConfig,
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
    except ValueError as exc:
        raise CliError(str(exc)) from exc
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
    from pathgrade.batch_plane.edge.report import write_report
    from pathgrade.batch_plane.edge.store import (
        EdgeRunNotFound,
        rubric_consistency_judge,
        run_metrics,
    )
    from pathgrade.cli.suite_scoring import make_judge
    from pathgrade.schemas.agent_graph import load_graph

    try:
        with cli_store(args) as store:
            judge = make_judge(args, store, args.judge_model) if args.judge_url else None
            try:
                grade = rubric_consistency_judge(judge) if judge else None
                metrics = run_metrics(store, args.run_id, grade)
            finally:
                if judge:
                    judge.close()
    except EdgeRunNotFound as exc:
        raise CliError(str(exc), exit_code=1) from exc
    written = write_report(metrics, load_graph(metrics["graph"]), args.out)
    replay, variant = metrics["replay"], metrics["variant"]
    print(
        f"run {args.run_id}: node trajectory consistency "
        f"{replay['node_trajectory_consistency']:.3f} (replays), "
        f"{_fmt(variant.get('node_trajectory_consistency'))} (variants); "
        f"convergence {metrics['convergence']['convergence_rate']:.3f}"
    )
    print("wrote " + ", ".join(str(path) for path in written))
    return 0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
