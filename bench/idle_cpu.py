"""CPU an idle `pathgrade up` costs, per process, against another checkout's in the same run.

Starts the stack (bundled broker, embedded store, no traffic), lets it settle, then reads
each process's CPU time from /proc over `--seconds` and prints it as % of one core per
role (collector, store owner, realtime, broker), alternating this checkout with the one
`--against` names (its python, or a commit: bench/ingest.py's `baseline_python`),
`--rounds` times; the last line is this / against in total. The stack prints its status
line at its default pace (every 30 s), as a user's would.

    python bench/idle_cpu.py --against ../main-worktree/.venv/bin/python
                             [--seconds 30] [--settle 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import (
    ROLES,
    Variant,
    baseline_python,
    cpu_seconds,
    process_tree,
    role_of,
    start_stack,
)

from pathgrade.stack.broker import free_port

DEFAULT_STATUS_EVERY = ("--status-every", "30")  # `start_stack` asks for 1 s; undo that


def idle_share(variant: Variant, settle_s: float, seconds: float) -> dict[str, float]:
    """% of one core per role of an idle stack of `variant` over `seconds`, after
    `settle_s` from "pathgrade is up"."""
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-idle-"))
    stack = start_stack(variant, data_dir, free_port(), nice=19)
    try:
        time.sleep(settle_s)
        pids = process_tree(stack.pid, data_dir)
        before = cpu_seconds(pids)
        time.sleep(seconds)
        after = cpu_seconds(pids)
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        shutil.rmtree(data_dir, ignore_errors=True)
    shares: dict[str, float] = {}
    for name, used in after.items():
        if not name.startswith("bench"):
            role = role_of(name)
            shares[role] = shares.get(role, 0.0) + (used - before.get(name, 0.0)) / seconds * 100
    return shares


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", metavar="PYTHON|COMMIT", required=True)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    variants = [
        Variant("against", baseline_python(args.against), DEFAULT_STATUS_EVERY),
        Variant("this", sys.executable, DEFAULT_STATUS_EVERY),
    ]
    runs = [
        (variant.label, idle_share(variant, args.settle, args.seconds))
        for _ in range(args.rounds)
        for variant in variants
    ]
    print(f"{'% of one core, idle':<22}" + "".join(f"{label:>10}" for label, _ in runs))
    for role in ROLES:
        print(f"  {role:<20}" + "".join(f"{shares.get(role, 0.0):>10.1f}" for _, shares in runs))
    print(f"  {'total':<20}" + "".join(f"{sum(shares.values()):>10.1f}" for _, shares in runs))

    def total(label: str) -> float:
        return sum(sum(shares.values()) for run_label, shares in runs if run_label == label)

    print(f"idle CPU this / against: {total('this') / total('against'):.2f}")


if __name__ == "__main__":
    main()
