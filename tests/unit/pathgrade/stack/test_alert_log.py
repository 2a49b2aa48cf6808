"""The alert log handler writes lines in order, in bursts, and never blocks its caller."""

from __future__ import annotations

import io
import logging
import threading
import time

from pathgrade.schemas.topics import ALERT_LOGGER

from pathgrade.stack.alert_log import AlertLogHandler, configure_alert_log


class BlockingStream(io.StringIO):
    """A stream whose writes wait until `release` is set (a pipe nobody reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.entered = threading.Event()  # a write is under way (and waits for `release`)
        self.writes = 0

    def write(self, text: str) -> int:
        self.entered.set()
        self.release.wait()
        self.writes += 1
        return super().write(text)


def test_lines_are_written_in_order_in_one_write_per_burst() -> None:
    stream = BlockingStream()
    stream.release.set()
    handler = configure_alert_log("%(message)s", stream)
    try:
        logger = logging.getLogger(ALERT_LOGGER)
        for n in range(50):
            logger.info("alert %d", n)
        handler.flush()
        assert stream.getvalue().splitlines() == [f"alert {n}" for n in range(50)]
        assert stream.writes == 1
        logger.info("alert late")
        deadline = time.monotonic() + 5
        while "alert late" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stream.getvalue().endswith("alert late\n")  # the timer thread wrote it
    finally:
        logging.getLogger(ALERT_LOGGER).removeHandler(handler)
        handler.close()


def test_an_unread_output_never_blocks_and_dropped_lines_are_counted() -> None:
    stream = BlockingStream()
    handler = AlertLogHandler(stream, interval_s=0.01, max_pending=10)
    handler.setFormatter(logging.Formatter("%(message)s"))
    record = logging.LogRecord(ALERT_LOGGER, logging.INFO, __file__, 1, "alert %d", (0,), None)
    first = logging.LogRecord(ALERT_LOGGER, logging.INFO, __file__, 1, "first", None, None)
    handler.handle(first)
    assert stream.entered.wait(5)  # the timer thread is now stuck writing "first"
    producer = threading.Thread(target=lambda: [handler.handle(record) for _ in range(25)])
    producer.start()
    producer.join(timeout=30)  # a handle() that waited on the stuck stream would never end
    assert not producer.is_alive()
    assert handler.dropped == 15
    stream.release.set()
    handler.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "first"
    assert lines[1:11] == ["alert 0"] * 10
    assert lines[11] == "alert log: 15 lines dropped (the output was not read)"


def test_a_closed_output_counts_lines_as_dropped() -> None:
    stream = io.StringIO()
    handler = AlertLogHandler(stream, interval_s=60)
    handler.setFormatter(logging.Formatter("%(message)s"))
    stream.close()
    handler.handle(logging.LogRecord(ALERT_LOGGER, logging.INFO, __file__, 1, "a", None, None))
    handler.flush()  # no exception: the line is counted instead
    assert handler.dropped == 1
    handler.close()


def test_the_writer_thread_starts_with_the_first_line() -> None:
    def writers() -> set[threading.Thread]:
        return {thread for thread in threading.enumerate() if thread.name == "alert-log"}

    before = writers()
    handler = AlertLogHandler(io.StringIO(), interval_s=60)
    handler.setFormatter(logging.Formatter("%(message)s"))
    assert not writers() - before  # a process that never alerts runs no writer
    handler.handle(logging.LogRecord(ALERT_LOGGER, logging.INFO, __file__, 1, "a", None, None))
    assert len(writers() - before) == 1
    handler.close()
