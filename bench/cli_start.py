"""CPU of short `pathgrade` commands: this checkout against another, in the same run.

Each command runs as `python -m pathgrade.cli ...` in a child process; its CPU is the
child's user + system time (`resource.getrusage(RUSAGE_CHILDREN)` before and after), so
what is measured is what a user's shell or a test's subprocess pays: the interpreter's
start, the imports and the command. The commands: `sql --help`, `status --help` and
`sql "SELECT 1"` on a migrated embedded store (one per checkout, migrated by that
checkout's own command line). Runs alternate between the two checkouts (after one
uncounted warm-up run of each, which writes the bytecode caches); prints the median CPU
seconds of each command per checkout and the ratio of this checkout's to the other's.

    python bench/cli_start.py --against /work/main/.venv/bin/python [--runs 5]

The other checkout's commands run in its root (the folder holding its `.venv`, or
`--against-cwd`), so its own sources are imported.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

COMMANDS: dict[str, tuple[str, ...]] = {
    "sql --help": ("sql", "--help"),
    "status --help": ("status", "--help"),
    'sql "SELECT 1"': ("sql", "SELECT 1", "--data-dir", "{data_dir}"),
}
"""Name -> arguments after `python -m pathgrade.cli` (`{data_dir}`: the migrated store)."""
CHILD_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The children's environment: bytecode caches written, as a user's first run writes them."""


class Checkout:
    """One checkout's interpreter, the folder its commands run in, and its migrated store."""

    def __init__(self, name: str, python: Path, root: Path, data_dir: Path) -> None:
        self.name = name
        self.python = python
        self.root = root
        self.data_dir = data_dir

    def command(self, arguments: tuple[str, ...]) -> list[str]:
        """The command line running `pathgrade` with `arguments`."""
        filled = [a.format(data_dir=self.data_dir) for a in arguments]
        return [str(self.python), "-m", "pathgrade.cli", *filled]

    def cpu_s(self, arguments: tuple[str, ...]) -> float:
        """User + system CPU seconds of one run of `arguments`; a failed run stops the bench."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            self.command(arguments), cwd=self.root, env=CHILD_ENV, capture_output=True,
            text=True, check=False,
        )  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: {' '.join(arguments)} failed:\n{done.stderr}")
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    def migrate(self) -> None:
        """Create and migrate this checkout's store."""
        self.cpu_s(("migrate", "--data-dir", str(self.data_dir)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--against", type=Path, required=True, metavar="PYTHON",
        help="the other checkout's interpreter (e.g. /work/main/.venv/bin/python)",
    )  # fmt: skip
    parser.add_argument(
        "--against-cwd", type=Path, metavar="DIR",
        help="where its commands run (default: the folder holding its .venv)",
    )  # fmt: skip
    parser.add_argument("--runs", type=int, default=5, help="counted runs of each command")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    other_root = args.against_cwd or args.against.absolute().parents[2]
    with tempfile.TemporaryDirectory(prefix="cli-start-") as scratch:
        checkouts = [
            Checkout("this", Path(sys.executable), here, Path(scratch, "this")),
            Checkout("other", args.against, other_root, Path(scratch, "other")),
        ]
        for checkout in checkouts:
            checkout.migrate()
        cpu: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs + 1):
            for name, arguments in COMMANDS.items():
                for checkout in checkouts if run % 2 else reversed(checkouts):
                    used = checkout.cpu_s(arguments)
                    if run:  # run 0 warms the bytecode caches
                        cpu.setdefault((name, checkout.name), []).append(used)
    print(f"CPU seconds per command (median of {args.runs}); other: {args.against}")
    print(f"{'command':<18} {'this':>8} {'other':>8} {'this/other':>11}")
    for name in COMMANDS:
        this = statistics.median(cpu[name, "this"])
        other = statistics.median(cpu[name, "other"])
        print(f"{name:<18} {this:8.3f} {other:8.3f} {this / other:11.2f}")


if __name__ == "__main__":
    main()
