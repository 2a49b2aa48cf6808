"""`pathgrade judge calibrate`, `pathgrade score` and `pathgrade scorer` (the online box)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.cli.model_flags import model_flag
from pathgrade.cli.progress import Progress
from pathgrade.cli.suite_scoring import judge_args, make_judge, score_suite_run, scoring_args
from pathgrade.cli.support import (
    CliError,
    cli_store,
    message_key_setting,
    metrics_arg,
    served_metrics,
    stop_on_signal,
    store_args,
)

if TYPE_CHECKING:
    import threading

    from pathgrade.batch_plane.scoring.online import OnlineScorer
    from pathgrade.stack.broker_follow import BrokerWatch


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
    store_args(score, tenant=True)
    scoring_args(score)
    score.add_argument("--run", dest="run_id", required=True, metavar="RUN_ID")
    score.add_argument("--suite", type=Path, required=True, metavar="suite.yaml")
    score.set_defaults(run=_cmd_score)

    scorer = commands.add_parser("scorer", help="run the online scorer on pathgrade.sampled")
    store_args(scorer)
    judge_args(scorer, required=False)
    model_flag(
        scorer, "--kafka", OnlineScorerConfig, "bootstrap_servers", metavar="HOST:PORT",
        suffix=" (default: the broker of the pathgrade up running on --data-dir, followed to "
        "the fresh one of each swap of its bundled broker)",
    )  # fmt: skip
    metrics_arg(scorer)
    model_flag(
        scorer, "--policy", OnlineScorerConfig, "policy", type=Path, metavar="FILE",
        prefix="YAML file of the ",
    )  # fmt: skip
    scorer.add_argument(
        "--events-out", type=Path, metavar="FILE",
        help="append each score as a gen_ai.evaluation.result event (JSONL)",
    )  # fmt: skip
    scorer.set_defaults(run=_cmd_scorer)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.scoring.calibration import (
        LabelsError,
        calibrate,
        labels_digest,
        load_labels,
        store_calibration,
    )
    from pathgrade.batch_plane.scoring.judge import JudgeError
    from pathgrade.batch_plane.scoring.rubrics import RubricError, load_rubric

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
            with Progress("judging", "judgement") as progress:
                result = calibrate(
                    judge, rubric, labels, args.repeats, labels_digest(labels), progress
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
    from pathgrade.batch_plane.evaluation.suite import SuiteError, load_suite

    try:
        suite = load_suite(args.suite)
    except SuiteError as exc:
        raise CliError(str(exc)) from exc
    with cli_store(args) as store:
        return score_suite_run(args, store, suite, args.run_id)


def _cmd_scorer(args: argparse.Namespace) -> int:
    from pathgrade.batch_plane.scoring.online import OnlineScorer, OnlineScorerStats
    from pathgrade.cli.agents import kafka_bootstrap
    from pathgrade.detectors import PolicyError, load_policy
    from pathgrade.stack.broker_follow import BrokerWatch, stack_broker

    try:
        policy = load_policy(args.policy) if args.policy else None
    except (PolicyError, OSError) as exc:
        raise CliError(f"--policy: {exc}") from exc
    bundled = stack_broker(args.data_dir)
    bootstrap = kafka_bootstrap(args)
    with cli_store(args) as store:
        judge = make_judge(args, store, args.judge_model) if args.judge_url else None
        events = args.events_out.open("a", encoding="utf-8") if args.events_out else None

        def on_event(event: dict[str, Any]) -> None:
            assert events is not None
            events.write(json.dumps(event) + "\n")
            events.flush()

        done = OnlineScorerStats()  # of the scorers on brokers the stack swapped away
        running: list[OnlineScorer] = []
        signalled = stop_on_signal()
        try:

            def counters() -> dict[str, Any]:
                return asdict(done.plus(running[0].stats) if running else done)

            with served_metrics(args.metrics_listen, "scorer", counters):
                while not signalled.is_set():
                    scorer = OnlineScorer(
                        OnlineScorerConfig(
                            bootstrap_servers=bootstrap, policy=policy,
                            message_key=message_key_setting(args, bootstrap),
                        ),
                        store, judge,
                        on_event if events else None,
                    )  # fmt: skip
                    running[:] = [scorer]
                    # the stack's own broker is followed to the fresh one of each swap
                    watch = BrokerWatch(args.data_dir, bootstrap, signalled) if (
                        bootstrap == bundled) else None  # fmt: skip
                    print(f"scorer: {bootstrap} pathgrade.sampled -> scores", flush=True)
                    _score_until_moved(scorer, watch, signalled)
                    running.clear()
                    done = done.plus(scorer.stats)
                    fresh = watch.moved_to if watch is not None else None
                    bootstrap = bundled = fresh or bootstrap
        finally:
            if judge:
                judge.close()
            if events:
                events.close()
        print(
            f"scored {done.scored} of {done.messages} sampled traces "
            f"({done.scores} scores, {done.skipped} skipped, "
            f"{done.judge_failures} judge failures)"
        )
    return 0


def _score_until_moved(
    scorer: OnlineScorer, watch: BrokerWatch | None, signalled: threading.Event
) -> None:
    """Run `scorer` until `signalled`, or (with a `BrokerWatch`) until its broker moved,
    then close it: the old broker's client errors after a move are the swap's."""
    from pathgrade.stack.broker_follow import moved_away

    moved = False
    try:
        scorer.run(watch.stop if watch is not None else signalled)
    except Exception:  # kafka-python's, once the swapped broker is gone
        moved = moved_away(watch)
        if not moved:
            raise
    finally:
        try:
            scorer.close()
        except Exception:
            if not (moved or moved_away(watch)):
                raise
