"""A long run at a steady rate: the memory of every process of the stack and the alert
detection delay, window by window.

Starts `pathgrade up` (bundled Tansu broker, chDB store, a webhook to a receiver in this
process, as bench/realtime.py does), waits for bench/ingest.py's warm-up, then sends the
realistic mix (bench/realtime.py's paced requests: each trace stamped so its agent span
ends at its request's send time) at `--rate` spans/s for `--minutes`. The next window's
requests are planned in a thread while the current one is sent. Every `--window-s` it
prints one line: minutes since the start, spans sent (as scheduled) and stored (the store
writer's counter) in the window, alerts received in it, p50/p99/max detection delay
(the turn's top span end -> the realtime plane's `detected_at_ns`, over the first alert
of each trace received in the window) and the webhook's p99 (-> received), the peak RSS of
each process role in the window (bench/memory.py's sampler, every second: the store owner
is `pathgrade up`'s main process, which holds chDB; realtime is its largest process),
and whether the stack swapped its bundled broker in the window (its "broker swapped for
a fresh one" status line; it swaps once the broker's RSS passes `broker_max_mb`, 1024 by
default, checked at most every 30 s; `--broker-max-mb` sets it lower, so that swaps come
every minute or two). After the soak it counts the spans in the store once each
(`uniqExact` of trace and span id) beside its rows (a span written twice around a swap
counts twice until merged).

At the end: per role, the window peaks after `--warmup-minutes` (min, max and the
least-squares slope in MB per 10 minutes), the worst window's p99, the store owner's
maximum, the swaps and the p99 of their windows, every failure trace alerted or not, and
whether each target of issue 46 holds (printed, not asserted): memory flat after warm-up
(|slope| at most FLAT_SHARE of the role's median per 10 minutes), the store owner under
1.5 GB, p99 detection delay under 2 s in every window.

`--against COMMIT|PYTHON` (as bench/ingest.py takes it) soaks that checkout's stack
first, then this one's, and prints the ratios of the store owner's maximum and the worst
p99.

    python bench/soak.py [--rate 3000] [--minutes 60] [--window-s 30] [--warmup-minutes 5]
                         [--senders 4] [--broker-max-mb MB] [--against PYTHON|COMMIT]

Figures: docs/scale.md ("Long run").
"""

from __future__ import annotations

import argparse
import json
import queue
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realtime
from ingest import Variant, baseline_python, stack_snapshot, start_stack, warm_up
from memory import Sampler, stack_memory
from pathgrade.batch_plane.store.remote import RemoteStore
from realtime import Receiver, TemplateTrace, percentile

from pathgrade.stack.broker import free_port
from pathgrade.stack.options import StackOptions

ROLES = ("store owner", "collector", "realtime", "broker", "other")
SWAP_LINE = "broker swapped for a fresh one"  # `Stack._swap_broker`'s status line
STORE_OWNER_LIMIT_MB = 1536.0
P99_LIMIT_S = 2.0
FLAT_SHARE = 0.02  # "flat": |slope| per 10 minutes at most this share of the median
_MB = 1024 * 1024
SPANS_STORED = "SELECT uniqExact(TraceId, SpanId), count() FROM spans"
WRITER_NICE = StackOptions.model_fields["store_writer_niceness"].default


@dataclass
class Window:
    """What one window of the soak sent, stored, alerted and held."""

    end_s: float  # since the soak started
    sent: int
    stored: int
    alerts: int
    detection_s: list[float]  # sorted
    webhook_s: list[float]  # sorted
    rss_mb: dict[str, float]  # role -> the peak RSS of its largest process in the window
    swaps: int


@dataclass
class Soak:
    """A whole soak of one variant: its windows and the failure traces it alerted on."""

    variant: Variant
    windows: list[Window] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    alerted: set[str] = field(default_factory=set)
    sent: int = 0
    stored: int = 0
    distinct: int = 0  # spans in the store by (trace id, span id): uniqExact
    rows: int = 0  # the spans table's rows: a span written twice counts twice until merged


def planner(
    templates: list[TemplateTrace],
    args: argparse.Namespace,
    start_ns: int,
    out: queue.Queue,
) -> None:
    """Plan every window's requests (fresh trace ids per window) into `out`, one ahead."""
    windows = round(args.minutes * 60 / args.window_s)
    for index in range(windows):
        window_start = start_ns + int(index * args.window_s * 1e9)
        out.put(
            realtime.plan(templates, args.rate, args.window_s, window_start, seed=7_000_003 + index)
        )
    out.put(None)


def role_peaks(sampler: Sampler) -> dict[str, float]:
    """role -> the peak RSS (MB) of its largest process in the sampler's time."""
    peaks: dict[str, float] = {}
    for name, rss in sampler.peak_rss.items():
        role = name.split(":", 1)[0]  # `stack_memory` names: "role: process [pid]"
        peaks[role] = max(peaks.get(role, 0.0), rss / _MB)
    return peaks


def first_alerts(soak: Soak, alerts: list[tuple[int, dict]]) -> tuple[list[float], list[float]]:
    """(detection delays, webhook delays) in s of the first alert of each trace."""
    detection, webhook = [], []
    for received_ns, alert in alerts:
        trace_id = alert["trace_id"]
        if trace_id in soak.alerted:
            continue
        soak.alerted.add(trace_id)
        detection.append((alert["detected_at_ns"] - alert["trace_end_ns"]) / 1e9)
        webhook.append((received_ns - alert["trace_end_ns"]) / 1e9)
    return sorted(detection), sorted(webhook)


def stored_spans(data_dir: Path) -> int:
    snapshot = stack_snapshot(data_dir)
    return snapshot["store_writer"]["spans"] if snapshot is not None else 0


def swap_count(data_dir: Path) -> int:
    return (data_dir / "stack.log").read_text(errors="replace").count(SWAP_LINE)


def print_window(window: Window) -> None:
    rss = " ".join(f"{role} {window.rss_mb[role]:.0f}" for role in ROLES if role in window.rss_mb)
    print(
        f"{window.end_s / 60:6.1f} min  sent {window.sent:>7,}  stored {window.stored:>7,}  "
        f"alerts {window.alerts:>4}  detection p50/p99/max "
        f"{percentile(window.detection_s, 0.5):5.2f} {percentile(window.detection_s, 0.99):5.2f} "
        f"{max(window.detection_s, default=float('nan')):5.2f} s  webhook p99 "
        f"{percentile(window.webhook_s, 0.99):5.2f} s  RSS MB: {rss}  "
        f"swap {'yes' if window.swaps else 'no'}",
        flush=True,
    )


def soak_once(variant: Variant, templates: list[TemplateTrace], args: argparse.Namespace) -> Soak:
    """Run one variant's stack through the whole soak."""
    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    data_dir = Path(tempfile.mkdtemp(prefix="pathgrade-soak-"))
    http_port = free_port()
    hook = ("--alert-webhook", receiver.url, "--capture-tools", "*")
    broker = ("--broker-max-mb", str(args.broker_max_mb)) if args.broker_max_mb else ()
    hooked = Variant(variant.label, variant.python, (*variant.up_args, *hook, *broker))
    stack = start_stack(hooked, data_dir, http_port, nice=WRITER_NICE)
    soak = Soak(variant)
    try:
        state = json.loads((data_dir / "stack.json").read_text())
        store = RemoteStore(state["query_url"], state.get("token", ""))
        warm_spans = warm_up(http_port, data_dir, store)[0]
        realtime.wait_for_quiet(receiver, quiet_s=2.0)
        seen, stored_before, swaps_before = len(receiver.received), stored_spans(data_dir), 0
        start_ns = time.time_ns() + int(5e9)  # time to plan the first window
        planned_windows: queue.Queue[list[realtime.PlannedRequest] | None] = queue.Queue(maxsize=1)
        threading.Thread(
            target=planner, args=(templates, args, start_ns, planned_windows), daemon=True
        ).start()
        index = 0
        while (planned := planned_windows.get()) is not None:
            window_start_ns = start_ns + int(index * args.window_s * 1e9)
            sampler = Sampler(partial(stack_memory, stack.pid, data_dir), every_s=1.0)
            sampler.start()
            sent, _, failing = realtime.send_planned(
                http_port, planned, window_start_ns, args.senders
            )
            time.sleep(max(0.0, window_start_ns / 1e9 + args.window_s - time.time()))
            sampler.stop()
            alerts = receiver.alerts(seen)
            seen += len(alerts)
            detection, webhook = first_alerts(soak, alerts)
            stored, swaps = stored_spans(data_dir), swap_count(data_dir)
            window = Window(
                (index + 1) * args.window_s, sent, stored - stored_before, len(alerts),
                detection, webhook, role_peaks(sampler), swaps - swaps_before,
            )  # fmt: skip
            stored_before, swaps_before = stored, swaps
            soak.windows.append(window)
            soak.failing |= failing
            soak.sent += sent
            print_window(window)
            index += 1
        realtime.wait_for_store(data_dir, soak.sent + warm_spans, limit_s=600)
        realtime.wait_for_quiet(receiver)
        first_alerts(soak, receiver.alerts(seen))
        soak.stored = stored_spans(data_dir) - warm_spans
        soak.distinct, soak.rows = (
            value - warm_spans for value in store.query(SPANS_STORED).rows[0]
        )
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        receiver.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)
    return soak


def slope_per_10_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per 10 minutes; 0 under 2 points."""
    if len(points) < 2:
        return 0.0
    seconds, mb = zip(*points, strict=True)
    return statistics.linear_regression(seconds, mb).slope * 600


def report(soak: Soak, args: argparse.Namespace) -> tuple[float, float]:
    """The soak's summary and targets; returns (store owner max MB, worst window p99 s)."""
    windows = soak.windows
    after = [w for w in windows if w.end_s > args.warmup_minutes * 60]
    print(f"\n{soak.variant.label} ({soak.variant.python}): {len(windows)} windows of "
          f"{args.window_s:.0f} s at {args.rate:,.0f} spans/s; sent {soak.sent:,}, stored "
          f"{soak.stored:,} (distinct spans {soak.distinct:,}, rows {soak.rows:,}); failure "
          f"traces {len(soak.failing)}, alerted {len(soak.failing & soak.alerted)}")  # fmt: skip
    print(f"RSS MB per window after the first {args.warmup_minutes:g} min "
          f"({len(after)} windows): min / max / slope per 10 min")  # fmt: skip
    flat = True
    for role in ROLES:
        points = [(w.end_s, w.rss_mb[role]) for w in after if role in w.rss_mb]
        if not points:
            continue
        values = [mb for _, mb in points]
        slope = slope_per_10_min(points)
        flat_here = abs(slope) <= FLAT_SHARE * statistics.median(values)
        flat = flat and flat_here
        print(f"  {role:<12} {min(values):7.0f} {max(values):7.0f} {slope:+8.1f}"
              f"{'' if flat_here else '  (not flat)'}")  # fmt: skip
    p99s = [(percentile(w.detection_s, 0.99), w) for w in windows if w.detection_s]
    worst_p99, worst = max(p99s, key=lambda p: p[0], default=(float("nan"), None))
    owner_max = max((w.rss_mb.get("store owner", 0.0) for w in windows), default=0.0)
    every = [d for w in windows for d in w.detection_s]
    print(f"detection delay over the soak: p50 {percentile(sorted(every), 0.5):.2f} s, "
          f"p99 {percentile(sorted(every), 0.99):.2f} s; worst window p99 {worst_p99:.2f} s"
          + (f" (at {worst.end_s / 60:.1f} min)" if worst else ""))  # fmt: skip
    print(f"store owner max RSS {owner_max:.0f} MB")
    swapped = [w for w in windows if w.swaps]
    print(f"broker swaps: {sum(w.swaps for w in windows)}" + "".join(
        f"; at {w.end_s / 60:.1f} min p99 {percentile(w.detection_s, 0.99):.2f} s"
        for w in swapped))  # fmt: skip
    late = [w for w in windows if percentile(w.detection_s, 0.99) >= P99_LIMIT_S]
    print("targets (issue 46):")
    print(f"  memory flat after warm-up: {'holds' if flat and after else 'does not hold'}"
          + ("" if after else " (no window after warm-up)"))  # fmt: skip
    print(f"  store owner under {STORE_OWNER_LIMIT_MB:.0f} MB: "
          f"{'holds' if owner_max < STORE_OWNER_LIMIT_MB else 'does not hold'}")  # fmt: skip
    print(
        f"  p99 detection delay under {P99_LIMIT_S:g} s in every window: "
        f"{'holds' if not late and p99s else f'does not hold ({len(late)} windows over)'}"
    )
    return owner_max, worst_p99


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=3000.0, help="spans/s sent")
    parser.add_argument("--minutes", type=float, default=60.0, help="length of the soak")
    parser.add_argument("--window-s", type=float, default=30.0, help="seconds per line")
    parser.add_argument(
        "--warmup-minutes", type=float, default=5.0,
        help="minutes left out of the memory summary (min/max/slope)",
    )  # fmt: skip
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument(
        "--broker-max-mb", type=int, metavar="MB",
        help="the stack's broker_max_mb (default: its own, 1024): smaller swaps more often",
    )  # fmt: skip
    parser.add_argument(
        "--against", metavar="PYTHON|COMMIT",
        help="soak the stack of that checkout first (a python of its venv, or a commit)",
    )  # fmt: skip
    args = parser.parse_args()
    for name in ("rate", "minutes", "window_s"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.broker_max_mb is not None and args.broker_max_mb <= 0:
        parser.error("--broker-max-mb must be positive")
    if args.window_s > args.minutes * 60:
        parser.error("--window-s must not exceed --minutes")
    variants = [Variant("this", sys.executable)]
    if args.against:
        variants.insert(0, Variant("against", baseline_python(args.against)))
    print("preparing realistic traces ...", file=sys.stderr, flush=True)
    templates = realtime.template_traces("realistic")
    soaks = []
    for variant in variants:
        print(f"{variant.label}: {args.rate:,.0f} spans/s for {args.minutes:g} min ...",
              flush=True)  # fmt: skip
        soaks.append(soak_once(variant, templates, args))
    results = [report(soak, args) for soak in soaks]
    if len(results) == 2:
        (base_owner, base_p99), (owner, p99) = results
        print(f"\nthis / against: store owner max {owner / base_owner:.2f}, "
              f"worst window p99 {p99 / base_p99:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
