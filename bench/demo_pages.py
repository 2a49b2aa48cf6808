"""What filling the demo's pages costs the live path: `pathgrade up --demo` against
`pathgrade up --demo --no-demo-pages` (live traffic only), alternating, in the same run.

Each run starts a fresh stack, reads its output as it comes and keeps, from its start:
when it was up, its first alert line, the demo's `every page is populated` line (pages on),
and over `--seconds` after it was up, the largest realtime p99 detection delay and the
spans in and stored its status lines show (every 5 s). The last lines are the means of
each variant and their ratio (pages on / off): the seeding waits for the first alert and
runs at nice 19, so the first alert after up, the detection delay and the share of the
spans taken in that were stored within the window should not move (the spans taken in do:
the seeding's own runs send some).

    python bench/demo_pages.py [--seconds 90] [--rounds 2]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

ALERT_LINE = re.compile(r"^\d\d:\d\d:\d\d (low|medium|high|critical) +PG\d+ ")
STATUS = re.compile(r"^status: in ([\d,]+) spans.*\| stored ([\d,]+)")
DELAY = re.compile(r"p99 delay ([\d.]+) s")


@dataclass
class Run:
    """What one stack showed, in seconds from its start."""

    pages: bool
    up_s: float | None = None
    first_alert_s: float | None = None
    populated_s: float | None = None
    p99_delays: list[float] = field(default_factory=list)
    spans_in: int = 0
    stored: int = 0


def run_once(pages: bool, seconds: float) -> Run:
    """One fresh `pathgrade up --demo` (with or without its pages) for `seconds` after up."""
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-demo-bench-"))
    extra = [] if pages else ["--no-demo-pages"]
    run, began = Run(pages), time.monotonic()
    stack = subprocess.Popen(
        [sys.executable, "-m", "pathgrade.cli", "up", "--demo", *extra, "--data-dir",
         str(data_dir), "--grpc-port", "0", "--http-port", "0", "--status-every", "5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip

    def read() -> None:
        assert stack.stdout is not None
        for line in stack.stdout:
            now = time.monotonic() - began
            if run.up_s is None and line.startswith("pathgrade is up"):
                run.up_s = now
            elif run.first_alert_s is None and ALERT_LINE.match(line):
                run.first_alert_s = now
            elif line.startswith("demo: every page is populated"):
                run.populated_s = now
            elif (status := STATUS.match(line)) and run.up_s and now <= run.up_s + seconds:
                run.spans_in, run.stored = (int(g.replace(",", "")) for g in status.groups())
                run.p99_delays += [float(d) for d in DELAY.findall(line)]

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while run.up_s is None or time.monotonic() - began < run.up_s + seconds:
            if stack.poll() is not None:
                raise SystemExit("pathgrade up exited early")
            time.sleep(0.5)
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        reader.join(timeout=10)
        shutil.rmtree(data_dir, ignore_errors=True)
    return run


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return mean(known) if known else None


def _shown(value: float | None, unit: str = " s") -> str:
    return "-" if value is None else f"{value:.1f}{unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs = []
    for _ in range(args.rounds):
        for pages in (True, False):
            run = run_once(pages, args.seconds)
            runs.append(run)
            print(
                f"pages {'on ' if pages else 'off'}: up {_shown(run.up_s)}, first alert "
                f"{_shown(run.first_alert_s)}, every page populated {_shown(run.populated_s)}, "
                f"max p99 delay {_shown(max(run.p99_delays, default=None))}, in {run.spans_in} "
                f"spans, stored {run.stored} over {args.seconds:.0f} s",
                flush=True,
            )
    sides = {}
    for pages in (True, False):
        mine = [r for r in runs if r.pages == pages]
        sides[pages] = {
            "first alert after up": _mean(
                [r.first_alert_s - r.up_s for r in mine if r.first_alert_s and r.up_s]
            ),
            "max p99 delay": _mean([max(r.p99_delays, default=None) for r in mine]),
            "share of spans in stored": _mean([r.stored / r.spans_in for r in mine if r.spans_in]),
        }
    populated = _mean([r.populated_s - r.up_s for r in runs if r.populated_s and r.up_s])
    print(f"every page populated after up (pages on): {_shown(populated)}")
    for name in sides[True]:
        on, off = sides[True][name], sides[False][name]
        ratio = f"{on / off:.2f}x" if on is not None and off else "-"
        print(f"{name}: pages on {_shown(on, '')} / off {_shown(off, '')} = {ratio}")


if __name__ == "__main__":
    main()
