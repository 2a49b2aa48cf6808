"""`pathgrade judge calibrate`, `pathgrade score` and `pathgrade scorer` (the online box)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pathgrade.cli_support import (
    CliError,
    cli_store,
    metrics_arg,
    progress_line,
    served_metrics,
    stop_on_signal,
    store_args,
)


def register(commands: Any) -> None:
    judge = commands.add_parser("judge", help="judge tools: calibration against human labels")
    judge_commands = judge.add_subparsers(dest="judge_command", required=True)
    calibrate = judge_commands.add_parser(
        "calibrate", help="run the judge over a human-labelled set and store its agreement"
    )
    store_args(calibrate)
    judge_args(calibrate, required=True)
    calibrate.add_argument("--labels", type=Path, required=True, metavar="human.jsonl")
    calibrate.add_argument("--rubric", required=True, metavar="ID@VERSION")
    calibrate.add_argument("--repeats", type=int, default=3, help="judgements per item (k)")
    calibrate.set_defaults(run=_cmd_calibrate)

    score = commands.add_parser("score", help="score every trace of a run with a suite's metrics")
    store_args(score)
    scoring_args(score)
    score.add_argument("--run", dest="run_id", required=True, metavar="RUN_ID")
    score.add_argument("--suite", type=Path, required=True, metavar="suite.yaml")
    score.set_defaults(run=_cmd_score)

    scorer = commands.add_parser("scorer", help="run the online scorer on pathgrade.sampled")
    store_args(scorer)
    judge_args(scorer, required=False)
    scorer.add_argument("--kafka", required=True, metavar="HOST:PORT")
    metrics_arg(scorer)
    scorer.add_argument(
        "--policy", type=Path, metavar="FILE",
        help="policy YAML whose `scorers:` assign metrics per tier, service or agent",
    )  # fmt: skip
    scorer.add_argument(
        "--events-out", type=Path, metavar="FILE",
        help="append each score as a gen_ai.evaluation.result event (JSONL)",
    )  # fmt: skip
    scorer.set_defaults(run=_cmd_scorer)


def scoring_args(parser: argparse.ArgumentParser) -> None:
    """The judge (optional) and the judge budget of a scoring job."""
    judge_args(parser, required=False)
    parser.add_argument("--budget-calls", type=int, help="stop after this many judge calls")
    parser.add_argument("--budget-tokens", type=int, help="stop after this many judge tokens")
    parser.add_argument("--budget-usd", type=float, help="stop after this judge cost (USD)")


def judge_args(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "--judge-url", required=required, metavar="URL",
        help="OpenAI-compatible base URL, e.g. https://api.openai.com/v1",
    )  # fmt: skip
    parser.add_argument(
        "--judge-model", metavar="MODEL",
        help="pinned judge model id (score: defaults to the suite's judge model)",
    )  # fmt: skip
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", metavar="NAME",
        help="environment variable holding the judge API key",
    )  # fmt: skip
    parser.add_argument("--concurrency", type=int, default=8, help="judge requests in flight")


def make_judge(args: argparse.Namespace, store: Any, model: str, budget: Any = None) -> Any:
    from batch_plane.judge import Judge, JudgeEndpoint

    if not model:
        raise CliError("--judge-model is required with --judge-url")
    endpoint = JudgeEndpoint(
        args.judge_url, model, api_key_env=args.api_key_env, concurrency=args.concurrency
    )
    return Judge(endpoint, store=store, budget=budget)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from batch_plane.calibration import (
        LabelsError,
        calibrate,
        labels_digest,
        load_labels,
        store_calibration,
    )
    from batch_plane.judge import JudgeError
    from batch_plane.rubrics import RubricError, load_rubric

    if args.repeats < 1:
        raise CliError(f"--repeats must be at least 1, got {args.repeats}")
    try:
        rubric = load_rubric(args.rubric)
        labels = load_labels(args.labels, rubric)
    except (RubricError, LabelsError) as exc:
        raise CliError(str(exc)) from exc
    with cli_store(args) as store:
        judge = make_judge(args, store, args.judge_model)
        try:
            result = calibrate(
                judge, rubric, labels, args.repeats, labels_digest(labels), progress_line("judging")
            )
        except JudgeError as exc:
            raise CliError(str(exc), exit_code=1) from exc
        finally:
            judge.close()
        store_calibration(store, result)
    print(
        f"calibration of {result.model} with {result.rubric_version} on {result.items} items "
        f"x {result.repeats} repeats: agreement {result.agreement:.3f}, kappa "
        f"{result.kappa:.3f}, false-pass rate {result.false_pass_rate:.3f}, judge variance "
        f"{result.judge_variance:.4f}"
    )
    return 0


def _cmd_score(args: argparse.Namespace) -> int:
    from batch_plane.suite import SuiteError, load_suite

    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        raise CliError(str(exc)) from exc
    with cli_store(args) as store:
        return score_suite_run(args, store, suite, args.run_id)


def score_suite_run(args: argparse.Namespace, store: Any, suite: Any, run_id: str) -> int:
    """Score every trace of `run_id` with the suite's trace metrics (the judge ones when
    --judge-url is given), within the judge budget; prints what was scored and spent."""
    from batch_plane.calibration import calibration_status
    from batch_plane.judge import JudgeBudget, JudgeError
    from batch_plane.offline_scoring import (
        ITEM_METRICS,
        JUDGE_METRICS,
        REFERENCE_METRICS,
        TRACE_METRICS,
        TraceScorer,
        UnknownMetric,
        score_run,
    )
    from batch_plane.rubrics import load_rubric

    metrics = tuple(m.id for m in suite.metrics if m.id in TRACE_METRICS + REFERENCE_METRICS)
    item_metrics = tuple(m.id for m in suite.metrics if m.id in ITEM_METRICS)
    known = TRACE_METRICS + REFERENCE_METRICS + ITEM_METRICS
    others = [m.id for m in suite.metrics if m.id not in known]
    if others:
        print(f"not scored here (scored by eval): {', '.join(others)}", file=sys.stderr)
    if not metrics and not item_metrics:
        raise CliError(f"{args.suite}: no metric pathgrade scores from a run's traces")
    references = _references(store, suite) if "trajectory_accuracy" in metrics else {}
    rubric_refs = pinned_rubric(suite, metrics + item_metrics)
    model = args.judge_model or (suite.judge.model if suite.judge else "")
    budget = JudgeBudget(args.budget_calls, args.budget_tokens, args.budget_usd)
    judge = make_judge(args, store, model, budget) if args.judge_url else None
    try:
        scorer = TraceScorer(metrics, judge, tuple(suite.slices), references, rubric_refs)
        outcome = score_run(
            store, run_id, scorer, args.concurrency, progress_line(f"scoring run {run_id}"),
            item_metrics,
        )  # fmt: skip
    except (UnknownMetric, JudgeError) as exc:
        raise CliError(str(exc), exit_code=1 if isinstance(exc, JudgeError) else 2) from exc
    finally:
        if judge:
            judge.close()
    for metric in metrics + item_metrics:
        if judge and metric in JUDGE_METRICS + REFERENCE_METRICS + ("response_consistency",):
            ref = load_rubric(rubric_refs.get(metric, metric)).ref
            if not calibration_status(store, model, ref):
                print(f"{metric}: judge {model} with {ref} is uncalibrated (cannot gate)")
    if outcome.traces == 0:
        raise CliError(f"run {run_id!r} has no traces in the store")
    if judge:
        print(f"judge: {budget.calls} calls, {budget.tokens} tokens, ${budget.usd:.4f}")
    print(outcome.summary())
    return 0


def pinned_rubric(suite: Any, metrics: tuple[str, ...]) -> dict[str, str]:
    """The suite's `judge.rubric_version` (a shipped rubric ref such as `faithfulness@1`)
    pins that rubric's metric; a version pathgrade does not ship is a configuration error,
    never silently replaced by another version."""
    from batch_plane.rubrics import RubricError, load_rubric

    if suite.judge is None or not suite.judge.rubric_version:
        return {}
    try:
        rubric = load_rubric(suite.judge.rubric_version)
    except RubricError as exc:
        raise CliError(f"{suite.suite}: judge.rubric_version: {exc}") from exc
    if rubric.id not in metrics:
        raise CliError(
            f"{suite.suite}: judge.rubric_version {rubric.ref} is not the rubric of any "
            f"metric scored here ({', '.join(metrics)})"
        )
    return {rubric.id: rubric.ref}


def _references(store: Any, suite: Any) -> dict[str, list[dict[str, Any]]]:
    """Dataset item id -> expected tool calls, over the suite's published datasets."""
    from batch_plane.datasets import DatasetError, Datasets

    datasets = Datasets(store)
    try:
        infos = [datasets.resolve(ref.name, published=True) for ref in suite.datasets]
    except DatasetError as exc:
        raise CliError(f"trajectory_accuracy needs the suite's datasets: {exc}") from exc
    return {
        item.item_id: item.expected_tool_calls
        for info in infos
        for item in datasets.items(info.ref)
        if item.expected_tool_calls
    }


def _cmd_scorer(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from batch_plane.online_scorer import OnlineScorer, OnlineScorerConfig
    from detectors import PolicyError, load_policy

    try:
        policy = load_policy(args.policy) if args.policy else None
    except (PolicyError, OSError) as exc:
        raise CliError(f"--policy: {exc}") from exc
    with cli_store(args) as store:
        judge = make_judge(args, store, args.judge_model) if args.judge_url else None
        events = args.events_out.open("a", encoding="utf-8") if args.events_out else None

        def on_event(event: dict[str, Any]) -> None:
            assert events is not None
            events.write(json.dumps(event) + "\n")
            events.flush()

        scorer = OnlineScorer(
            OnlineScorerConfig(args.kafka, policy=policy), store, judge,
            on_event if events else None,
        )  # fmt: skip
        stop = stop_on_signal()
        try:
            with served_metrics(args.metrics_listen, "scorer", lambda: asdict(scorer.stats)):
                print(f"scorer: {args.kafka} pathgrade.sampled -> scores", flush=True)
                scorer.run(stop)
        finally:
            scorer.close()
            if judge:
                judge.close()
            if events:
                events.close()
        print(
            f"scored {scorer.stats.scored} of {scorer.stats.messages} sampled traces "
            f"({scorer.stats.scores} scores, {scorer.stats.skipped} skipped, "
            f"{scorer.stats.judge_failures} judge failures)"
        )
    return 0
