"""Scoring a suite's run from a command: the judge's arguments and budget, the judge
itself, and the scoring of every trace of a run (shared by `score`, `eval`, `gate` and
`edge report`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.progress import Progress
from pathgrade.cli.support import CliError
from pathgrade.schemas.store import Store


def scoring_args(parser: argparse.ArgumentParser) -> None:
    """The judge (optional) and the judge budget of a scoring job."""
    judge_args(parser, required=False)
    parser.add_argument("--budget-calls", type=int, help="stop after this many judge calls")
    parser.add_argument("--budget-tokens", type=int, help="stop after this many judge tokens")
    parser.add_argument("--budget-usd", type=float, help="stop after this judge cost (USD)")


def judge_args(parser: argparse.ArgumentParser, required: bool) -> None:
    from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint

    model_flag(parser, "--judge-url", JudgeEndpoint, "base_url", required=required, metavar="URL")
    model_flag(
        parser, "--judge-model", JudgeEndpoint, "model", metavar="MODEL",
        suffix=" (score: defaults to the suite's judge model)",
    )  # fmt: skip
    model_flag(parser, "--api-key-env", JudgeEndpoint, "api_key_env", metavar="NAME")
    model_flag(parser, "--concurrency", JudgeEndpoint, "concurrency", type=int)


def make_judge(args: argparse.Namespace, store: Store, model: str, budget: Any = None) -> Any:
    from pathgrade.batch_plane.scoring.judge import Judge
    from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint

    if not model:
        raise CliError("--judge-model is required with --judge-url")
    endpoint = JudgeEndpoint(
        args.judge_url, model, api_key_env=args.api_key_env, concurrency=args.concurrency
    )
    return Judge(endpoint, store=store, budget=budget)


def score_suite_run(args: argparse.Namespace, store: Store, suite: Any, run_id: str) -> int:
    """Score every trace of `run_id` with the suite's trace metrics (the judge ones when
    --judge-url is given), within the judge budget; prints what was scored and spent."""
    from pathgrade.batch_plane.scoring.calibration import calibration_status
    from pathgrade.batch_plane.scoring.judge import JudgeBudget, JudgeError
    from pathgrade.batch_plane.scoring.rubrics import load_rubric
    from pathgrade.batch_plane.scoring.trace_scorers import (
        ITEM_METRICS,
        JUDGE_METRICS,
        REFERENCE_METRICS,
        TRACE_METRICS,
        TraceScorer,
        UnknownMetric,
        score_run,
    )

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
        with Progress(f"scoring run {run_id}", "trace") as progress:
            outcome = score_run(store, run_id, scorer, args.concurrency, progress, item_metrics)
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
    from pathgrade.batch_plane.scoring.rubrics import RubricError, load_rubric

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


def _references(store: Store, suite: Any) -> dict[str, list[dict[str, Any]]]:
    """Dataset item id -> expected tool calls, over the suite's published datasets."""
    from pathgrade.batch_plane.evaluation.datasets import DatasetError, Datasets

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
