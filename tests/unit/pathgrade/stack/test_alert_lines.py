"""Alerts as short human lines, paced by a token bucket with a summary of the rest (a fake
clock throughout: no wall-clock bound)."""

from __future__ import annotations

import io
import json
import logging
import time
from collections import Counter

import pytest
from pathgrade.realtime_plane.sinks import log_alert
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.topics import ALERT_LOGGER

from pathgrade.stack.alert_lines import (
    REASON_CHARS,
    AlertLineSettings,
    AlertPacer,
    alert_line,
    summary_line,
)
from pathgrade.stack.alert_log import AlertLogHandler, HumanAlertFormatter, configure_alert_log

DETECTED_NS = 1_750_000_000_123_000_000


def make_alert(code: str = "PG108", reason: str = "change_plan retried 3 times", **fields) -> Alert:
    values = dict(
        alert_key="k" * 32, code=code, name="retry-storm", severity="high", kind="violation",
        reason=reason, trace_id="ab" * 16, span_id="cd" * 8, tenant="default",
        service="support-agent", agent="support-agent", conversation_id="conv-1",
        risk_tier="medium", policy="default", details={"tool": "change_plan", "attempts": 3},
        trace_start_ns=1, trace_end_ns=2, detected_at_ns=DETECTED_NS,
    )  # fmt: skip
    return Alert(**{**values, **fields})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_names_time_severity_code_service_reason_and_the_trace_page() -> None:
    line = alert_line(make_alert(), "http://127.0.0.1:8123/")
    clock = time.strftime("%H:%M:%S", time.localtime(DETECTED_NS / 1e9))
    assert line == (
        f"{clock} high     PG108 support-agent: change_plan retried 3 times  "
        f"http://127.0.0.1:8123/trace/{'ab' * 16}?span={'cd' * 8}"
    )
    assert alert_line(make_alert(), None).endswith(f"  trace {'ab' * 16} span {'cd' * 8}")
    trace_level = alert_line(make_alert(span_id=""), "http://h:1")
    assert trace_level.endswith(f"  http://h:1/trace/{'ab' * 16}")
    acme = alert_line(make_alert(tenant="acme corp"), "http://h:1")
    assert acme.endswith(f"  http://h:1/trace/{'ab' * 16}?tenant=acme+corp&span={'cd' * 8}")


def test_a_monitors_line_names_it_and_links_its_example_trace_or_else_its_chart() -> None:
    monitor = {"kind": "monitor", "code": "PG200", "name": "tool-errors", "service": "",
               "reason": "tool-errors: 9.0% of 200 turns had a failed tool call"}  # fmt: skip
    line = alert_line(make_alert(**monitor), "http://h:1")
    assert " PG200 monitor tool-errors: 9.0% of 200 turns had a failed tool call  " in line
    assert line.endswith(f"http://h:1/trace/{'ab' * 16}?span={'cd' * 8}")  # its example
    alone = make_alert(**monitor, trace_id="", span_id="")
    assert alert_line(alone, "http://h:1").endswith(
        "  http://h:1/alerts?kind=monitor#monitor-tool-errors"
    )
    assert alert_line(alone, None).endswith("call  monitor tool-errors")


def test_a_long_reason_is_cut_and_a_check_that_could_not_decide_says_so() -> None:
    long = alert_line(make_alert(reason="word " * 60 + "\n  tail"), None)
    reason = long.split(": ", 1)[1].split("  trace ")[0]
    assert len(reason) == REASON_CHARS and reason.endswith("...")
    undecided = alert_line(make_alert(kind="cannot_decide", reason="no arguments"), None)
    assert ": cannot decide: no arguments  trace " in undecided
    cut = alert_line(make_alert(reason="x" * 5000), "http://h:1")
    assert len(cut) - len(f"http://h:1/trace/{'ab' * 16}?span={'cd' * 8}") < REASON_CHARS + 50


def test_the_pacer_lets_a_burst_through_then_its_rate() -> None:
    clock = FakeClock()
    pacer = AlertPacer(lines_per_s=2, burst=5, summary_every_s=30, clock=clock)
    assert [pacer.admit("PG101") for _ in range(7)] == [True] * 5 + [False] * 2
    clock.now += 0.5  # one token back
    assert [pacer.admit("PG101") for _ in range(2)] == [True, False]
    clock.now += 100  # refills to the burst, not beyond
    assert sum(pacer.admit("PG110") for _ in range(20)) == 5


def test_the_summary_counts_what_was_held_back_by_code_once_due() -> None:
    clock = FakeClock()
    pacer = AlertPacer(lines_per_s=1, burst=1, summary_every_s=30, clock=clock)
    assert pacer.summary() is None  # nothing held
    assert pacer.admit("PG101")
    for code in ["PG101"] * 200 + ["PG110"] * 100 + ["PG108"] * 12:
        pacer.admit(code)
    clock.now += 29
    assert pacer.summary() is None  # not due yet
    clock.now += 1
    assert pacer.summary() == (
        "+312 alerts in the last 30 s not shown: PG101 x200, PG110 x100, PG108 x12 "
        "(all of them: pathgrade alerts)"
    )
    assert pacer.summary(final=True) is None  # reported once
    assert [pacer.admit("PG101"), pacer.admit("PG101")] == [True, False]  # refilled meanwhile
    clock.now += 2
    assert pacer.summary(final=True).startswith("+1 alert in the last 2 s not shown: PG101 x1")


def test_a_summary_names_the_most_frequent_codes_and_counts_the_others() -> None:
    held = Counter({f"PG1{n:02d}": n + 1 for n in range(8)})
    line = summary_line(held, 30)
    assert line.startswith("+36 alerts in the last 30 s not shown: PG107 x8, PG106 x7, ")
    assert ", PG103 x4, 3 other codes x6 (" in line


def test_bad_pacing_is_refused_naming_the_values() -> None:
    with pytest.raises(ValueError, match="lines_per_s > 0"):
        AlertPacer(lines_per_s=0, burst=5, summary_every_s=30)


def test_the_handler_writes_admitted_lines_and_the_summary_at_close() -> None:
    stream = io.StringIO()
    clock = FakeClock()
    pacer = AlertPacer(lines_per_s=1, burst=2, summary_every_s=30, clock=clock)
    handler = AlertLogHandler(stream, interval_s=60, pacer=pacer)
    handler.setFormatter(HumanAlertFormatter("http://127.0.0.1:9"))
    logger = logging.getLogger(f"{ALERT_LOGGER}.test")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        for n in range(10):
            logger.info("alert %s", "{}", extra={"alert": make_alert(code=f"PG10{n % 2}")})
        handler.flush()
        assert len(stream.getvalue().splitlines()) == 2  # the summary is not due yet
    finally:
        logger.removeHandler(handler)
        handler.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3 and all("/trace/" in line for line in lines[:2])
    assert lines[2].startswith("+8 alerts in the last 1 s not shown: PG100 x4, PG101 x4")


def test_configured_formats_human_by_default_settings_and_json_for_shippers() -> None:
    alert = make_alert()
    for settings, expected in [
        (AlertLineSettings(trace_url_base="http://h:1"), alert_line(alert, "http://h:1")),
        (AlertLineSettings(log_format="json"), f"alert {alert.json_text}"),
        (None, f"alert {alert.json_text}"),
    ]:
        stream = io.StringIO()
        handler = configure_alert_log("%(message)s", stream, settings)
        try:
            log_alert(alert)
            handler.flush()
        finally:
            logging.getLogger(ALERT_LOGGER).removeHandler(handler)
            handler.close()
        assert stream.getvalue() == expected + "\n"
    assert json.loads(expected.split(" ", 1)[1])["alert_key"] == alert.alert_key
