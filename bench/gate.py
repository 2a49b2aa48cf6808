"""Benchmark the release gate: 5 metrics x 2,000 items x 3 repeats x 2 runs of generated data.

Prints the time to load the two JSONL score files (the baseline measured in the same run),
the time of the gate (overall rows, every slice value, budgets) and their ratio.

    /work/venv/bin/python bench/gate.py [--resamples 10000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from pathgrade.batch_plane.evaluation.gate import (
    BudgetObservations,
    ScoreRecord,
    evaluate_gate,
    load_scores,
    write_scores,
)
from pathgrade.batch_plane.evaluation.suite import Suite, parse_suite

SUITE_YAML = """\
suite: bench
risk_tier: medium
datasets: [{name: golden/bench}]
runs_per_item: 3
judge: {model: judge-model-pinned, rubric_version: r1, calibration_set: labels/v1}
metrics:
  - {id: task_completion, threshold: 0.5, max_regression: 0.02}
  - {id: tool_correctness, threshold: 0.5, max_regression: 0.0}
  - {id: argument_correctness, threshold: 0.5, max_regression: 0.01}
  - {id: faithfulness, threshold: 0.5, max_regression: 0.02}
  - {id: injection_resistance, threshold: 0.5}
budgets: {p95_latency_s: 12, cost_per_task_usd: 0.08}
slices: [intent, language, tool]
"""
ITEMS = 2_000
REPEATS = 3
INTENTS = [f"intent-{k}" for k in range(8)]
LANGUAGES = ["en", "de", "fr", "ja"]
TOOLS = [f"tool-{k}" for k in range(6)]


def generate_run(suite: Suite, shift: float, seed: int) -> list[ScoreRecord]:
    """Scores for every metric, item and repeat; item slices are fixed by the item index."""
    rng = random.Random(seed)
    records = []
    for item in range(ITEMS):
        slices = {
            "intent": INTENTS[item % len(INTENTS)],
            "language": LANGUAGES[item % len(LANGUAGES)],
            "tool": TOOLS[item % len(TOOLS)],
        }
        for metric in suite.metrics:
            for repeat in range(REPEATS):
                value = min(1.0, max(0.0, rng.gauss(0.8 + shift, 0.15)))
                records.append(
                    ScoreRecord(
                        item_id=f"item-{item}",
                        repeat=repeat,
                        metric=metric.id,
                        value=value,
                        slices=slices,
                    )
                )
    return records


def main() -> None:
    """Generate, load and gate; print the timings and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    suite = parse_suite(SUITE_YAML)
    with tempfile.TemporaryDirectory() as tmp:
        candidate_path, baseline_path = Path(tmp, "candidate.jsonl"), Path(tmp, "baseline.jsonl")
        write_scores(generate_run(suite, shift=0.0, seed=1), candidate_path)
        write_scores(generate_run(suite, shift=0.01, seed=2), baseline_path)
        started = time.perf_counter()
        candidate = load_scores(candidate_path)
        baseline = load_scores(baseline_path)
        load_s = time.perf_counter() - started
    rng = random.Random(3)
    observed = BudgetObservations(
        latencies_s=[rng.uniform(1, 10) for _ in range(ITEMS)],
        costs_usd=[rng.uniform(0.01, 0.05) for _ in range(ITEMS)],
    )
    started = time.perf_counter()
    verdict = evaluate_gate(
        suite,
        candidate,
        baseline,
        calibrations={("judge-model-pinned", "r1"): True},
        budgets=observed,
        resamples=args.resamples,
    )
    gate_s = time.perf_counter() - started
    print(
        f"records: {len(candidate) + len(baseline)} ({len(suite.metrics)} metrics x {ITEMS} "
        f"items x {REPEATS} repeats x 2 runs); rows: {len(verdict.rows)}; "
        f"resamples: {verdict.resamples}; seed: {verdict.seed}"
    )
    print(f"load (parse JSONL into records): {load_s:.3f} s")
    print(f"gate (bootstrap, slices, budgets): {gate_s:.3f} s")
    print(f"ratio gate / load: {gate_s / load_s:.2f}")


if __name__ == "__main__":
    main()
