"""Benchmark the scorers.

1. Deterministic scorers over 100,000 generated trajectories: pathgrade's scoring path
   (`tool_correctness` and `tool_call_f1` from batch_plane.scoring.trajectory, each wrapped in a
   `Score` with its deterministic id) against a plain loop computing the same recall and F1
   inline over the same data (every value is checked equal), batch by batch, interleaved.
   Prints the per-trajectory cost of each stage (normalising the calls, each metric, the
   Score records), of the plain loop, and the ratios of pathgrade's scoring alone and with
   its Score records to the plain loop.
2. Judge throughput against the local OpenAI stand-in answering after 200 ms: requests per
   second with a concurrency limit of N, against the theoretical N / 0.2 s.

    /work/venv/bin/python bench/scorers.py [--trajectories 100000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import gc
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.rubrics import load_rubric
from pathgrade.batch_plane.scoring.scores import Score
from pathgrade.batch_plane.scoring.trajectory import ToolCall, tool_call_f1, tool_correctness
from pathgrade.batch_plane.scoring.trajectory_calls import normalize_tool_calls

REPO = Path(__file__).resolve().parents[1]

TOOLS = ("lookup_order", "cancel_order", "refund", "send_email", "search_kb", "escalate")

T = TypeVar("T")
Pair = tuple[list[dict], list[dict]]


def trajectories(n: int, seed: int = 7) -> list[Pair]:
    """(called, expected) tool-call lists of 2-6 calls each."""
    rng = random.Random(seed)

    def calls() -> list[dict]:
        return [
            {"name": rng.choice(TOOLS), "args": {"id": rng.randrange(5)}}
            for _ in range(rng.randint(2, 6))
        ]

    return [(calls(), calls()) for _ in range(n)]


METRICS: dict[str, Callable[[list[ToolCall], list[ToolCall]], float]] = {
    "tool_correctness": tool_correctness,
    "tool_call_f1": tool_call_f1,
}


BATCH = 1_000  # trajectories scored per batch, as a scoring job streams them


def _timed(work: Callable[..., T], *args: Any) -> tuple[T, float]:
    """The result of ``work(*args)`` and the seconds it took."""
    started = time.perf_counter()
    result = work(*args)
    return result, time.perf_counter() - started


def _normalised(batch: list[Pair]) -> list[tuple[list[ToolCall], list[ToolCall]]]:
    """Each trajectory's calls normalised once, to be shared by every metric."""
    return [
        (normalize_tool_calls(called, "called"), normalize_tool_calls(expected, "expected"))
        for called, expected in batch
    ]


def _metric_values(
    scorer: Callable[[list[ToolCall], list[ToolCall]], float],
    normalised: list[tuple[list[ToolCall], list[ToolCall]]],
) -> list[float]:
    """One metric over a batch of normalised trajectories."""
    return [scorer(called, expected) for called, expected in normalised]


def score_records(values: dict[str, list[float]], first_index: int) -> list[Score]:
    """One `Score` per metric and trajectory, in trajectory order, its id computed."""
    scores = []
    for offset in range(len(next(iter(values.values())))):
        trace_id = f"{first_index + offset:032x}"
        for metric, metric_values in values.items():
            score = Score(metric, metric, "1", "bench", trace_id, value=metric_values[offset])
            _ = score.score_id
            scores.append(score)
    return scores


def pathgrade_batch(batch: list[Pair], first_index: int, seconds: dict[str, float]) -> list[Score]:
    """Both metrics of every trajectory in ``batch`` as `Score`s (with their ids); the time
    of each stage is added to ``seconds``."""
    normalised, spent = _timed(_normalised, batch)
    seconds["normalise"] += spent
    values = {}
    for metric, scorer in METRICS.items():
        values[metric], spent = _timed(_metric_values, scorer, normalised)
        seconds[metric] += spent
    scores, spent = _timed(score_records, values, first_index)
    seconds["Score records"] += spent
    return scores


def plain_loop(data: list[Pair]) -> list[tuple[float, float]]:
    """The same two numbers computed inline: name recall and (name, args) multiset F1."""
    out = []
    for called, expected in data:
        names = Counter(c["name"] for c in called)
        recall = sum(min(n, names[k]) for k, n in Counter(c["name"] for c in expected).items())
        p = Counter((c["name"], c["args"]["id"]) for c in called)
        r = Counter((c["name"], c["args"]["id"]) for c in expected)
        tp = (p & r).total()
        if tp == 0:
            f1 = 0.0
        else:  # RAGAS's formula, so both sides agree to the last bit
            precision, f1_recall = tp / p.total(), tp / r.total()
            f1 = 2 * precision * f1_recall / (precision + f1_recall)
        out.append((recall / len(expected), f1))
    return out


def bench_deterministic(n: int) -> None:
    """Time pathgrade and the plain loop batch by batch, interleaved, so that load on a shared
    machine hits both alike; check that they computed the same values."""
    data = trajectories(n)
    gc.freeze()  # the generated input is no cost of scoring: keep it out of GC passes
    seconds = dict.fromkeys(("normalise", *METRICS, "Score records", "plain loop"), 0.0)
    for first in range(0, n, BATCH):
        batch = data[first : first + BATCH]
        scores = pathgrade_batch(batch, first, seconds)
        plain, spent = _timed(plain_loop, batch)
        seconds["plain loop"] += spent
        # Checked and dropped batch by batch, as a scoring job writes and forgets its scores.
        expected = [value for pair in plain for value in pair]
        assert [s.value for s in scores] == expected, f"batch at {first}: values disagree"
    plain_s = seconds.pop("plain loop")
    scoring_s = sum(s for stage, s in seconds.items() if stage != "Score records")
    total_s = sum(seconds.values())
    print(f"deterministic scorers over {n:,} trajectories ({len(METRICS)} metrics each):")
    for stage, stage_s in seconds.items():
        print(f"  {stage:<18} {stage_s:7.2f} s  {stage_s / n * 1e6:7.1f} us/trajectory")
    print(f"  pathgrade scoring  {scoring_s:7.2f} s  {scoring_s / n * 1e6:7.1f} us/trajectory")
    print(f"  ... with Scores    {total_s:7.2f} s  {total_s / n * 1e6:7.1f} us/trajectory")
    print(f"  plain loop         {plain_s:7.2f} s  {plain_s / n * 1e6:7.1f} us/trajectory")
    print(f"  ratio              {scoring_s / plain_s:7.2f}x the plain loop (scoring)")
    print(f"  ratio              {total_s / plain_s:7.2f}x the plain loop (with Score records)")


def bench_judge(concurrency: int, requests: int, latency_s: float = 0.2) -> None:
    """The stand-in runs in its own process, as a remote judge would, and answers every
    request validly (its default script's malformed answers would time retries)."""
    rubric = load_rubric("task_completion@1")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_standin", "--latency-s", str(latency_s),
         "--always-best"],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        endpoint = JudgeEndpoint(url, "gpt-4o-mini", concurrency=concurrency)
        judge = Judge(endpoint)  # no store: every request reaches the server
        inputs = [{"question": f"q{i}", "answer": "a", "tool_calls": []} for i in range(requests)]
        judge.evaluate(rubric, inputs[0])  # warm the connection pool
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency * 2) as pool:
            list(pool.map(lambda i: judge.evaluate(rubric, i), inputs))
        elapsed = time.perf_counter() - started
        judge.close()
    finally:
        server.terminate()
        server.wait()
    rate = requests / elapsed
    theoretical = concurrency / latency_s
    print(f"judge throughput, {latency_s * 1000:.0f} ms stand-in, concurrency {concurrency}:")
    print(f"  {requests} requests in {elapsed:.2f} s = {rate:.1f}/s of {theoretical:.1f}/s "
          f"theoretical ({100 * rate / theoretical:.1f}%)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trajectories", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=320)
    args = parser.parse_args()
    bench_deterministic(args.trajectories)
    bench_judge(args.concurrency, args.requests)


if __name__ == "__main__":
    main()
