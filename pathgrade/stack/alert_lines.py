"""Alerts as short lines a person reads in a terminal, paced so status lines stay visible.

`alert_line` renders one alert as `time severity code service reason trace-URL`.
`AlertPacer` lets at most a few of them through a second (a token bucket: `burst` at once,
`lines_per_s` on average) and counts the rest by detector code; `summary` then says what
was held back, once per `summary_every_s`:
`+312 alerts in the last 30 s: PG101 x200, PG110 x100, PG108 x12 (pathgrade alerts)`.
Every alert is still on the topic, in the table and at the webhook; `--log-format json`
prints each one's full JSON document instead (for log shippers).
"""

from __future__ import annotations

import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from pathgrade.schemas.topics import DEFAULT_TENANT

if TYPE_CHECKING:
    from pathgrade.schemas.alerts import Alert

LogFormat = Literal["human", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("human", "json")
DEFAULT_LOG_FORMAT: LogFormat = "human"
REASON_CHARS = 90
"""A longer reason is cut to this many characters (the trace page has all of it)."""
CODES_NAMED = 5
"""A summary names this many codes, the most frequent first, then how many others."""


class AlertLineSettings(BaseModel):
    """How a process prints its alerts: `json` (one full JSON document a line) or `human`
    (`alert_line`, paced by `AlertPacer`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    log_format: LogFormat = Field(
        DEFAULT_LOG_FORMAT,
        description="alerts on standard error: 'human' one short line each (time, severity, "
        "code, service, reason, trace link), a few a second and a count of the rest; 'json' "
        "the full alert document a line, for log shippers",
    )
    trace_url_base: str | None = Field(
        None,
        description="the browser UI's address (`pathgrade ui`), so each human alert line "
        "links to its trace page with the alerted span selected (URL/trace/TRACE_ID?span="
        "SPAN_ID, and tenant=TENANT for a tenant other than the default); without it the "
        "line names the trace and span ids",
    )
    lines_per_s: float = Field(2.0, description="human alert lines a second, on average")
    burst: int = Field(5, description="human alert lines at once after a quiet spell")
    summary_every_s: float = Field(
        30.0, description="how often a count of the alerts given no line is printed"
    )


def trace_link(
    trace_id: str, trace_url_base: str | None, span_id: str = "", tenant: str = DEFAULT_TENANT
) -> str:
    """The trace page's URL (`<base>/trace/<id>`, `span=<span id>` selecting the span when
    there is one, `tenant=` naming a tenant other than the default, so a viewer of several
    tenants lands on the trace, not the tenant chooser), or `trace <id> span <span id>`
    without a base: two alerts of one trace on different spans (each failed attempt of a
    retry) read apart."""
    if trace_url_base is None:
        return f"trace {trace_id}" + (f" span {span_id}" if span_id else "")
    query: dict[str, str] = {}
    if tenant != DEFAULT_TENANT:
        query["tenant"] = tenant
    if span_id:
        query["span"] = span_id
    page = f"{trace_url_base.rstrip('/')}/trace/{trace_id}"
    return f"{page}?{urllib.parse.urlencode(query)}" if query else page


def monitor_link(name: str, trace_url_base: str | None) -> str:
    """The alerts page's chart of monitor `name`, or `monitor NAME` without a base."""
    if trace_url_base is None:
        return f"monitor {name}"
    return f"{trace_url_base.rstrip('/')}/alerts?kind=monitor#monitor-{name}"


def alert_line(alert: Alert, trace_url_base: str | None) -> str:
    """One alert as a short line: local detection time, severity, code, service (a
    monitor's: its name), reason (cut at REASON_CHARS), the link to the trace and its span
    (a monitor's without an example trace: to its chart)."""
    detected = time.strftime("%H:%M:%S", time.localtime(alert.detected_at_ns / 1e9))
    reason = " ".join(alert.reason.split())
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 3] + "..."
    if alert.kind == "cannot_decide":
        reason = f"cannot decide: {reason}"
    where = alert.service
    link = trace_link(alert.trace_id, trace_url_base, alert.span_id, alert.tenant)
    if alert.kind == "monitor":
        where = f"monitor {alert.name}"
        reason = reason.removeprefix(f"{alert.name}: ")
        if not alert.trace_id:
            link = monitor_link(alert.name, trace_url_base)
    return f"{detected} {alert.severity:<8} {alert.code} {where}: {reason}  {link}"


class AlertPacer:
    """Which alerts get a line: a token bucket (`burst` tokens, refilled at `lines_per_s`);
    alerts without a token are counted by code until `summary` reports them (`of`: as
    AlertLineSettings say)."""

    def __init__(
        self,
        lines_per_s: float,
        burst: int,
        summary_every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if lines_per_s <= 0 or burst < 1 or summary_every_s <= 0:
            raise ValueError(
                f"alert pacing needs lines_per_s > 0, burst >= 1 and summary_every_s > 0, got "
                f"{lines_per_s}, {burst}, {summary_every_s}"
            )
        self.lines_per_s = lines_per_s
        self.burst = burst
        self.summary_every_s = summary_every_s
        self._clock = clock
        self._tokens = float(burst)
        self._refilled_at = clock()
        self._held: Counter[str] = Counter()
        self._held_since: float | None = None  # when the first alert of this summary was held

    @classmethod
    def of(cls, settings: AlertLineSettings) -> AlertPacer:
        """The pacer `settings` describe."""
        return cls(settings.lines_per_s, settings.burst, settings.summary_every_s)

    def admit(self, code: str) -> bool:
        """True when an alert of `code` gets its line now; else it is counted."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._refilled_at) * self.lines_per_s)
        self._refilled_at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        if self._held_since is None:
            self._held_since = now
        self._held[code] += 1
        return False

    def summary(self, final: bool = False) -> str | None:
        """The line for the alerts held back, once `summary_every_s` passed since the first
        of them (or now, when `final`); None when none is held or it is not due."""
        if self._held_since is None:
            return None
        elapsed = self._clock() - self._held_since
        if elapsed < self.summary_every_s and not final:
            return None
        held, self._held, self._held_since = self._held, Counter(), None
        return summary_line(held, max(elapsed, 1.0))


def summary_line(held: Counter[str], seconds: float) -> str:
    """`+N alerts in the last S s: CODE xN, ...` (the most frequent codes first)."""
    ranked = sorted(held.items(), key=lambda item: (-item[1], item[0]))
    named = ", ".join(f"{code} x{count}" for code, count in ranked[:CODES_NAMED])
    others = ranked[CODES_NAMED:]
    if others:
        named += f", {len(others)} other codes x{sum(count for _, count in others)}"
    total = held.total()
    return (
        f"+{total} alert{'s' if total != 1 else ''} in the last {seconds:.0f} s not shown: "
        f"{named} (all of them: pathgrade alerts)"
    )
