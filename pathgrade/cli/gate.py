"""`pathgrade eval`, `pathgrade gate`, `pathgrade gates` and `pathgrade scores export`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pathgrade.cli.agents import agent_args, run_agent, store_for
from pathgrade.cli.suite_scoring import make_judge, score_suite_run, scoring_args
from pathgrade.cli.support import (
    CliError,
    positive_int,
    store_args,
)

FORMATS = ("table", "markdown", "json", "junit", "html")
SUFFIX_FORMATS = {".md": "markdown", ".json": "json", ".xml": "junit", ".html": "html"}


def register(commands: Any) -> None:
    """Add `eval`, `gate`, `gates` and `scores` to the `pathgrade` sub-commands."""
    evaluate = commands.add_parser("eval", help="run a suite's datasets through an agent")
    store_args(evaluate, tenant=True)
    evaluate.add_argument("suite", type=Path, metavar="SUITE.yaml")
    agent_args(evaluate)
    scoring_args(evaluate)
    evaluate.set_defaults(run=_cmd_eval)

    gate = commands.add_parser(
        "gate", help="release gate: candidate run vs baseline run (exit 0 pass, 1 fail, 2 error)"
    )
    store_args(gate, tenant=True)
    gate.add_argument("suite", type=Path, metavar="SUITE.yaml")
    gate.add_argument("--candidate", metavar="RUN", help="candidate run id (from the store)")
    gate.add_argument("--baseline", metavar="RUN", help="baseline run id (from the store)")
    gate.add_argument("--candidate-scores", type=Path, metavar="C.jsonl", help="score file")
    gate.add_argument("--baseline-scores", type=Path, metavar="B.jsonl", help="score file")
    gate.add_argument(
        "--candidate-budgets", type=Path, metavar="FILE.json",
        help="budget observations for score files (written by `scores export --budgets-out`)",
    )  # fmt: skip
    gate.add_argument(
        "--calibrated", action="store_true",
        help="with score files: the suite's judge is calibrated (the store is not there to say)",
    )  # fmt: skip
    gate.add_argument("--format", choices=FORMATS, default="table", help="stdout format")
    gate.add_argument(
        "--output", type=Path, action="append", default=[], metavar="FILE",
        help="also write the verdict here (repeatable); the suffix picks the format: "
        ".md markdown, .json JSON, .xml JUnit, .html the gate page as one file, anything "
        "else the table",
    )  # fmt: skip
    gate.add_argument("--seed", type=int, help="bootstrap seed (default 20260101)")
    gate.add_argument("--resamples", type=int, help="bootstrap resamples (default 10000)")
    gate.add_argument("--prices", type=Path, help="price table overriding the shipped one")
    gate.add_argument(
        "--no-record", action="store_true",
        help="do not record the verdict in the store (runs from the store are recorded: "
        "`pathgrade gates list`)",
    )  # fmt: skip
    gate.set_defaults(run=_cmd_gate)

    gates = commands.add_parser("gates", help="recorded gate verdicts")
    gate_actions = gates.add_subparsers(dest="action", required=True)
    listed = gate_actions.add_parser("list", help="recorded gates, newest first")
    store_args(listed, tenant=True)
    listed.add_argument("--suite", help="only this suite's gates")
    listed.add_argument("--limit", type=positive_int, default=20)
    listed.add_argument("--format", choices=("table", "json"), default="table")
    listed.set_defaults(run=_cmd_gates_list)
    shown = gate_actions.add_parser("show", help="print a recorded verdict again")
    store_args(shown, tenant=True)
    shown.add_argument("gate_id", metavar="GATE_ID")
    shown.add_argument("--format", choices=FORMATS, default="table")
    shown.set_defaults(run=_cmd_gates_show)

    scores = commands.add_parser("scores", help="score files for the gate")
    actions = scores.add_subparsers(dest="action", required=True)
    export = actions.add_parser(
        "export",
        help="write a run's scores as a JSONL score file, grouped by the layer each metric "
        "grades (its `layer` field)",
    )
    store_args(export, tenant=True)
    export.add_argument("--run", dest="run_id", required=True, metavar="RUN")
    export.add_argument("--out", type=Path, required=True, metavar="FILE.jsonl")
    export.add_argument(
        "--budgets-out", type=Path, metavar="FILE.json",
        help="also write the run's latency and cost observations",
    )  # fmt: skip
    export.add_argument("--prices", type=Path, help="price table overriding the shipped one")
    export.set_defaults(run=_cmd_scores_export)


def _load_suite(path: Path) -> Any:
    from pathgrade.batch_plane.evaluation.suite import SuiteError, load_suite

    try:
        return load_suite(path)
    except SuiteError as exc:
        raise CliError(str(exc)) from exc


def suite_policy(suite: Any, suite_file: Path) -> Any:
    """The detector policy the suite names (a path relative to the suite file), else the
    default policy: the same detectors and params the realtime plane would run."""
    from pathgrade.detectors import PolicyError, default_policy, load_policy

    if suite.policy is None:
        return default_policy()
    try:
        return load_policy(suite_file.parent / suite.policy)
    except (OSError, PolicyError) as exc:
        raise CliError(f"{suite_file}: policy: {exc}") from exc


def _prices(path: Path | None) -> Any:
    from pathgrade.detectors.prices import load_price_table

    try:
        return load_price_table(path)
    except (OSError, ValueError) as exc:
        raise CliError(f"--prices: {exc}") from exc


def _cmd_eval(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.datasets import Datasets
    from pathgrade.batch_plane.evaluation.runs import RunRecord, new_run_id

    suite = _load_suite(args.suite)
    with store_for(args) as store:
        datasets = Datasets(store)
        infos = [datasets.resolve(ref.name, published=True) for ref in suite.datasets]
        items = [item for info in infos for item in datasets.items(info.ref)]
        ids = [item.item_id for item in items]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise CliError(f"item ids repeat across the suite's datasets: {', '.join(repeated)}")
        run = RunRecord(
            run_id=args.run_id or new_run_id(),
            suite=suite.suite,
            agent=args.agent,
            dataset_versions={info.name: info.version for info in infos},
            params={"runs_per_item": suite.runs_per_item, "suite_file": str(args.suite)},
        )
        policy = suite_policy(suite, args.suite)
        judge = retrieval_judge(args, store, suite)
        try:
            code = run_agent(
                args, store, items, run, suite.runs_per_item, policy=policy, judge=judge
            )
        finally:
            if judge:
                judge.close()
        judged = [m.id for m in suite.metrics if m.is_judge]
        if judged and args.judge_url:
            score_suite_run(args, store, suite, run.run_id)
        elif judged:
            print(
                f"judge metrics {', '.join(judged)}: pass --judge-url, or score them with "
                f"`pathgrade score --run {run.run_id} --suite {args.suite} --judge-url URL`",
                file=sys.stderr,
            )
    return code


def retrieval_judge(args: argparse.Namespace, store: Any, suite: Any) -> Any:
    """The judge of an eval's judge-based context precision and recall (items without
    reference contexts): --judge-url with the suite's judge model, within the budget;
    None without --judge-url (those metrics then say a judge is needed)."""
    from pathgrade.batch_plane.scoring.judge import JudgeBudget

    if not args.judge_url:
        return None
    model = args.judge_model or (suite.judge.model if suite.judge else "")
    budget = JudgeBudget(args.budget_calls, args.budget_tokens, args.budget_usd)
    return make_judge(args, store, model, budget)


def _gate_inputs(args: argparse.Namespace, suite: Any) -> tuple[Any, Any, Any, Any]:
    """(candidate, baseline, calibrations, budgets) from the store or from score files."""
    from pathgrade.batch_plane.evaluation.gate import BudgetObservations, load_scores

    from_store = args.candidate is not None or args.baseline is not None
    from_files = args.candidate_scores is not None or args.baseline_scores is not None
    if from_store == from_files:
        raise CliError(
            "give --candidate and --baseline (runs in the store) or --candidate-scores and "
            "--baseline-scores (score files)"
        )
    if from_files:
        if args.candidate_scores is None or args.baseline_scores is None:
            raise CliError("--candidate-scores and --baseline-scores go together")
        budgets = None
        if args.candidate_budgets is not None:
            try:
                budgets = BudgetObservations(**json.loads(args.candidate_budgets.read_text()))
            except (OSError, ValueError, TypeError) as exc:
                raise CliError(f"--candidate-budgets: {exc}") from exc
        calibrations = (
            {(suite.judge.model, suite.judge.rubric_version): True}
            if suite.judge and args.calibrated
            else {}
        )
        return (
            load_scores(args.candidate_scores),
            load_scores(args.baseline_scores),
            calibrations,
            budgets,
        )
    if args.candidate is None or args.baseline is None:
        raise CliError("--candidate and --baseline go together")
    from pathgrade.batch_plane.evaluation.gate_inputs import (
        judge_calibrations,
        run_budgets,
        run_scores,
    )

    prices = _prices(args.prices)
    with store_for(args) as store:
        return (
            run_scores(store, args.candidate),
            run_scores(store, args.baseline),
            judge_calibrations(store, suite),
            run_budgets(store, args.candidate, prices),
        )


def render(verdict: Any, format: str, page: Callable[[], Any] | None = None) -> str:
    """The verdict in one of FORMATS; "html" is the gate page `page()` describes (a
    `pathgrade.web.gate_page.GateView`; the verdict alone without it)."""
    from pathgrade.batch_plane.evaluation import gate_report

    if format == "html":
        from pathgrade.web.gate_page import GateView, standalone_html

        return standalone_html(page() if page else GateView(verdict, "", "", "", "", {}))
    renderers = {
        "table": gate_report.to_terminal,
        "markdown": gate_report.to_markdown,
        "json": gate_report.to_json,
        "junit": gate_report.to_junit,
    }
    return renderers[format](verdict)


def _cmd_gate(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.gate import evaluate_gate, exit_code
    from pathgrade.batch_plane.evaluation.suite import ConfigurationError

    options = {
        key: value
        for key, value in (("seed", args.seed), ("resamples", args.resamples))
        if value is not None
    }
    try:
        suite = _load_suite(args.suite)
        candidate, baseline, calibrations, budgets = _gate_inputs(args, suite)
        verdict = evaluate_gate(
            suite, candidate, baseline, calibrations=calibrations, budgets=budgets, **options
        )
    except ConfigurationError as exc:
        print("\n".join(exc.problems), file=sys.stderr)
        return exit_code(exc)
    if args.candidate is not None:
        verdict = _with_diffs(args, verdict)
    gate_id = _record(args, verdict) if args.candidate is not None and not args.no_record else ""

    def page() -> Any:
        return _gate_page(args, verdict, gate_id, candidate, baseline)

    sys.stdout.write(render(verdict, args.format, page))
    for path in args.output:
        try:
            path.write_text(render(verdict, SUFFIX_FORMATS.get(path.suffix, "table"), page))
        except OSError as exc:
            raise CliError(f"--output {path}: {exc.strerror or exc}") from exc
    return exit_code(verdict)


def _with_diffs(args: argparse.Namespace, verdict: Any) -> Any:
    """The verdict with the trajectory diffs of its failing cases, from the store: the
    items' expected calls against the calls each failing attempt's trace shows."""
    from pathgrade.batch_plane.evaluation.cases import diff_targets, with_diffs
    from pathgrade.batch_plane.evaluation.gate_inputs import run_expected_calls, trace_calls

    with store_for(args) as store:
        expected = run_expected_calls(store, args.baseline)
        expected.update(run_expected_calls(store, args.candidate))
        actual = trace_calls(store, diff_targets(verdict.cases))
    return verdict.model_copy(update={"cases": with_diffs(verdict.cases, expected, actual)})


def _gate_page(
    args: argparse.Namespace, verdict: Any, gate_id: str, candidate: Any, baseline: Any
) -> Any:
    """The gate page of this verdict: the items behind its rows from the store (with their
    traces), or from the score files."""
    from pathgrade.web.gate_page import (
        GateView,
        evidence_from_records,
        metric_names,
        run_evidence,
    )
    from pathgrade.web.store_reads import ReadStore
    from pathgrade.web.viewers import EVERY_TENANT

    if args.candidate is None:
        names = (str(args.candidate_scores), str(args.baseline_scores))
        return GateView(verdict, gate_id, *names, "", evidence_from_records(candidate, baseline))
    with store_for(args) as store:
        evidence = run_evidence(
            ReadStore(store), EVERY_TENANT, args.candidate, args.baseline, metric_names(verdict)
        )
    return GateView(verdict, gate_id, args.candidate, args.baseline, "", evidence)


def _record(args: argparse.Namespace, verdict: Any) -> str:
    """Record a verdict over runs in the store, say under which id, and return it."""
    from pathgrade.batch_plane.evaluation.gate_store import record_gate

    with store_for(args) as store:
        gate_id = record_gate(store, verdict, args.candidate, args.baseline, str(args.suite))
    print(f"recorded as {gate_id} (pathgrade gates show {gate_id})", file=sys.stderr)
    return gate_id


def _cmd_gates_list(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.store.gates import list_gates
    from pathgrade.cli.output import format_json, format_table

    with store_for(args) as store:
        result = list_gates(store, args.suite, args.limit)
    print(format_table(result) if args.format == "table" else format_json(result))
    return 0


def _cmd_gates_show(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.gate_store import MissingGate, load_verdict
    from pathgrade.web.gate_page import recorded_gate_view
    from pathgrade.web.store_reads import ReadStore
    from pathgrade.web.viewers import EVERY_TENANT

    with store_for(args) as store:
        try:
            verdict = load_verdict(store, args.gate_id)
        except MissingGate as exc:
            raise CliError(str(exc)) from exc
        view = (
            recorded_gate_view(ReadStore(store), EVERY_TENANT, args.gate_id)
            if args.format == "html"
            else None
        )
    sys.stdout.write(render(verdict, args.format, lambda: view))
    return 0


def _cmd_scores_export(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.evaluation.gate import write_scores
    from pathgrade.batch_plane.evaluation.gate_inputs import MissingRun, run_budgets, run_scores
    from pathgrade.batch_plane.evaluation.records import by_layer_of_metric

    prices = _prices(args.prices)
    with store_for(args) as store:
        try:
            records = run_scores(store, args.run_id)
        except MissingRun as exc:
            raise CliError(str(exc)) from exc
        budgets = run_budgets(store, args.run_id, prices) if args.budgets_out else None
    layers = by_layer_of_metric(records)
    write_scores([record for _, group in layers for record in group], args.out)
    if budgets is not None:
        args.budgets_out.write_text(
            json.dumps({"latencies_s": budgets.latencies_s, "costs_usd": budgets.costs_usd})
        )
    counts = ", ".join(f"{layer} {len(group)}" for layer, group in layers)
    print(f"wrote {len(records)} scores of run {args.run_id} to {args.out} ({counts or 'none'})")
    return 0
