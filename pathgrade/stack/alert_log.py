"""The alert log line's output: a handler that writes in bursts and never blocks.

The alert log line (logger `schemas.topics.ALERT_LOGGER`, one record per alert, the alert
itself in the record's `alert` attribute) is one of the realtime plane's sinks; this
module is how a process sends it to its standard error: as short paced lines for a person
(`pathgrade.stack.alert_lines`, the default) or as `alert <JSON>` for log shippers.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

from pathgrade.schemas.topics import ALERT_LOGGER
from pathgrade.stack.alert_lines import AlertLineSettings, AlertPacer, alert_line

alert_log = logging.getLogger(ALERT_LOGGER)
WRITE_WAIT_S = 5.0


class AlertLogHandler(logging.Handler):
    """Writes the alert log lines in bursts from a thread of its own.

    One write every `interval_s` instead of a write and a flush per alert on the plane's
    thread (~10% of the realtime plane in a py-spy profile at hundreds of alerts a second;
    bench/alert_log.py: 0.54-0.57 of the CPU per line, the writer thread included),
    and an output nobody reads (a full pipe) never blocks the plane: past `max_pending`
    unwritten lines, new ones are dropped and counted, and the count is logged once the
    output moves again. Lines still unwritten when the process is killed are lost; the
    alerts themselves are on the topic and in the table. `stream` None: the current
    `sys.stderr`, looked up at each write. The writer thread starts with the first line,
    so a process that never alerts (most commands, the collector) runs none. With a
    `pacer`, alerts it holds back get no line; its summary of them is written when due
    (checked at every burst) and at `close`.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        interval_s: float = 0.2,
        max_pending: int = 100_000,
        pacer: AlertPacer | None = None,
    ) -> None:
        super().__init__()
        self.stream = stream
        self.max_pending = max_pending
        self.pacer = pacer
        self.dropped = 0
        self._lines: list[str] = []
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._interval_s = interval_s
        self._thread: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if not self._admitted(record):
            return
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        with self._pending_lock:
            if len(self._lines) >= self.max_pending:
                self.dropped += 1
            else:
                self._lines.append(line)
            self._start_writer()

    def _admitted(self, record: logging.LogRecord) -> bool:
        """Whether the record gets a line: always without a pacer; an alert the pacer holds
        back does not (the writer runs anyway, to write the pacer's summary)."""
        alert = getattr(record, "alert", None)
        if self.pacer is None or alert is None:
            return True
        with self._pending_lock:
            admitted = self.pacer.admit(alert.code)
            self._start_writer()
        return admitted

    def _start_writer(self) -> None:
        """Start the writer thread with the first line (call with `_pending_lock` held)."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="alert-log", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Write what is pending now (in order, one write) and the pacer's summary when
        due (or, `final`, of whatever it holds); if another write has been stuck for
        `WRITE_WAIT_S` (nobody reads the output), leave the lines pending."""
        if not self._write_lock.acquire(timeout=WRITE_WAIT_S):
            return
        try:
            with self._pending_lock:
                lines, self._lines = self._lines, []
                dropped, self.dropped = self.dropped, 0
                summary = self.pacer.summary(final) if self.pacer is not None else None
            if summary:
                lines.append(summary)
            if dropped:
                lines.append(f"alert log: {dropped} lines dropped (the output was not read)")
            if lines:
                self._write(lines)
        finally:
            self._write_lock.release()

    def _write(self, lines: list[str]) -> None:
        """One write of `lines`; a stream that is gone (closed, a broken pipe) counts them
        as dropped instead of killing the writer thread."""
        stream = self.stream or sys.stderr
        try:
            stream.write("\n".join(lines) + "\n")
            stream.flush()
        except (OSError, ValueError):
            with self._pending_lock:
                self.dropped += len(lines)

    def close(self) -> None:
        self._stop.set()
        self.flush(final=True)
        super().close()


class HumanAlertFormatter(logging.Formatter):
    """A record carrying an alert as `alert_line`; any other record as its message."""

    def __init__(self, trace_url_base: str | None) -> None:
        super().__init__()
        self.trace_url_base = trace_url_base

    def format(self, record: logging.LogRecord) -> str:
        alert = getattr(record, "alert", None)
        return record.getMessage() if alert is None else alert_line(alert, self.trace_url_base)


def configure_alert_log(
    fmt: str, stream: TextIO | None = None, settings: AlertLineSettings | None = None
) -> AlertLogHandler:
    """Route the alert log lines (logger `ALERT_LOGGER`, INFO) through one
    `AlertLogHandler`, replacing an earlier one of this process: `alert <JSON>` lines in
    format `fmt` without `settings` or with the json format, else human lines paced as
    `settings` say."""
    alert_log.setLevel(logging.INFO)
    alert_log.propagate = False
    for earlier in [h for h in alert_log.handlers if isinstance(h, AlertLogHandler)]:
        alert_log.removeHandler(earlier)
        earlier.close()
    if settings is None or settings.log_format == "json":
        handler = AlertLogHandler(stream)
        handler.setFormatter(logging.Formatter(fmt))
    else:
        pacer = AlertPacer.of(settings)
        handler = AlertLogHandler(stream, pacer=pacer)
        handler.setFormatter(HumanAlertFormatter(settings.trace_url_base))
    alert_log.addHandler(handler)
    return handler
