"""Benchmark the scorers.

1. Deterministic scorers over 100,000 generated trajectories: pathgrade's scoring path
   (`tool_correctness` and `tool_call_f1` from batch_plane.trajectory, each wrapped in a
   `Score` with its deterministic id) against a plain loop computing the same recall and F1
   inline over the same data. Prints the per-trajectory cost of each and their ratio.
2. Judge throughput against the local OpenAI stand-in answering after 200 ms: requests per
   second with a concurrency limit of N, against the theoretical N / 0.2 s.

    /work/venv/bin/python bench/scorers.py [--trajectories 100000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from batch_plane.judge import Judge, JudgeEndpoint
from batch_plane.rubrics import load_rubric
from batch_plane.scores import Score
from batch_plane.trajectory import normalize_tool_calls, tool_call_f1, tool_correctness

REPO = Path(__file__).resolve().parents[1]

TOOLS = ("lookup_order", "cancel_order", "refund", "send_email", "search_kb", "escalate")


def trajectories(n: int, seed: int = 7) -> list[tuple[list[dict], list[dict]]]:
    """(called, expected) tool-call lists of 2-6 calls each."""
    rng = random.Random(seed)

    def calls() -> list[dict]:
        return [
            {"name": rng.choice(TOOLS), "args": {"id": rng.randrange(5)}}
            for _ in range(rng.randint(2, 6))
        ]

    return [(calls(), calls()) for _ in range(n)]


def pathgrade_scores(data: list[tuple[list[dict], list[dict]]]) -> list[Score]:
    scores = []
    for index, (raw_called, raw_expected) in enumerate(data):
        called = normalize_tool_calls(raw_called, "called")  # once, shared by the metrics
        expected = normalize_tool_calls(raw_expected, "expected")
        trace_id = f"{index:032x}"
        for metric, value in (
            ("tool_correctness", tool_correctness(called, expected)),
            ("tool_call_f1", tool_call_f1(called, expected)),
        ):
            score = Score(metric, metric, "1", "bench", trace_id, value=value)
            _ = score.score_id
            scores.append(score)
    return scores


def plain_loop(data: list[tuple[list[dict], list[dict]]]) -> list[tuple[float, float]]:
    """The same two numbers computed inline: name recall and (name, args) multiset F1."""
    out = []
    for called, expected in data:
        names = Counter(c["name"] for c in called)
        recall = sum(min(n, names[k]) for k, n in Counter(c["name"] for c in expected).items())
        p = Counter((c["name"], c["args"]["id"]) for c in called)
        r = Counter((c["name"], c["args"]["id"]) for c in expected)
        tp = (p & r).total()
        f1 = 0.0 if tp == 0 else 2 * tp / (sum(p.values()) + sum(r.values()))
        out.append((recall / len(expected), f1))
    return out


def bench_deterministic(n: int) -> None:
    data = trajectories(n)
    started = time.perf_counter()
    ours = pathgrade_scores(data)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    plain = plain_loop(data)
    plain_s = time.perf_counter() - started
    assert all(
        abs(ours[2 * i].value - tc) < 1e-9 and abs(ours[2 * i + 1].value - f1) < 1e-9
        for i, (tc, f1) in enumerate(plain)
    ), "pathgrade's scorers disagree with the plain loop"
    print(f"deterministic scorers over {n:,} trajectories (2 metrics each):")
    print(f"  pathgrade  {ours_s:7.2f} s  {ours_s / n * 1e6:7.1f} us/trajectory")
    print(f"  plain loop {plain_s:7.2f} s  {plain_s / n * 1e6:7.1f} us/trajectory")
    print(f"  ratio      {ours_s / plain_s:7.2f}x the plain loop")


def bench_judge(concurrency: int, requests: int, latency_s: float = 0.2) -> None:
    """The stand-in runs in its own process, as a remote judge would."""
    rubric = load_rubric("task_completion@1")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_standin", "--latency-s", str(latency_s)],
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
