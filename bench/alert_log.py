"""CPU per alert log line: pathgrade's burst-writing handler against a plain StreamHandler.

All write real alert log records (as `realtime_plane.sinks.log_alert` makes them) of JSON
lines (formatted as `pathgrade up`'s realtime child formats
them) into a pipe that another process drains, as when `pathgrade up`'s output is piped.
The baseline is logging's StreamHandler (a write and a flush per line: what the realtime
plane did before); the other is `pathgrade.stack.alert_log.AlertLogHandler` (lines queued, one
write per burst from its own thread, whose CPU is counted too), and the same handler as
`pathgrade up` configures it by default (human lines paced by `AlertPacer`: at 20,000
alerts in a burst nearly all are counted, not printed). Alternating rounds in one run;
prints CPU µs per alert of each and the ratios to the baseline.

    python bench/alert_log.py [--lines 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import time

from pathgrade.schemas.alerts import Alert

from pathgrade.stack.alert_lines import AlertLineSettings, AlertPacer
from pathgrade.stack.alert_log import AlertLogHandler, HumanAlertFormatter

LINE_FORMAT = "%(asctime)s realtime %(message)s"


def sample_alert() -> Alert:
    return Alert(
        alert_key="k" * 32, code="PG108", name="retry-storm", severity="high",
        kind="violation", reason="Write change_plan was retried after a failure (3 attempts).",
        trace_id="ab" * 16, span_id="cd" * 8, tenant="default", service="support-agent",
        agent="support-agent", conversation_id="conv-1", risk_tier="medium", policy="default",
        details={"tool": "change_plan", "attempts": 3}, trace_start_ns=1, trace_end_ns=2,
        detected_at_ns=3,
    )  # fmt: skip


def cpu_per_line_us(handler: logging.Handler, lines: int, alert: Alert) -> float:
    """Log `lines` alert records through `handler` and flush; CPU µs per line (all threads)."""
    logger = logging.getLogger(f"bench.alert_log.{id(handler)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    started = time.process_time()
    for _ in range(lines):
        logger.info("alert %s", alert.json_text, extra={"alert": alert})
    handler.flush()
    used = time.process_time() - started
    logger.removeHandler(handler)
    return used / lines * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    drain = subprocess.Popen(
        [sys.executable, "-c", "import sys\nwhile sys.stdin.buffer.read(65536): pass"],
        stdin=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert drain.stdin is not None
    alert = sample_alert()
    totals = {"StreamHandler": 0.0, "AlertLogHandler": 0.0, "paced human": 0.0}
    try:
        for _ in range(args.rounds):
            plain = logging.StreamHandler(drain.stdin)
            plain.setFormatter(logging.Formatter(LINE_FORMAT))
            bursts = AlertLogHandler(drain.stdin)
            bursts.setFormatter(logging.Formatter(LINE_FORMAT))
            paced = AlertLogHandler(drain.stdin, pacer=AlertPacer.of(AlertLineSettings()))
            paced.setFormatter(HumanAlertFormatter("http://127.0.0.1:8123"))
            handlers = (
                ("StreamHandler", plain),
                ("AlertLogHandler", bursts),
                ("paced human", paced),
            )
            for name, handler in handlers:
                totals[name] += cpu_per_line_us(handler, args.lines, alert) / args.rounds
            bursts.close()
            paced.close()
    finally:
        drain.stdin.close()
        drain.wait()
    for name, us in totals.items():
        print(f"{name:<16} {us:6.1f} µs CPU per alert line")
    for name in ("AlertLogHandler", "paced human"):
        print(f"ratio {name} / StreamHandler  {totals[name] / totals['StreamHandler']:.2f}")


if __name__ == "__main__":
    main()
