"""Progress of long commands: a tqdm bar on a terminal, periodic plain lines elsewhere (a
fake clock: no wall-clock bound)."""

from __future__ import annotations

import io
import threading

from pathgrade.cli.progress import Progress, plain_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_a_bar_with_counts_and_rate() -> None:
    terminal = Terminal()
    with Progress("eval", "attempt", stream=terminal) as progress:
        for done in range(1, 11):
            progress(done, 10)
    drawn = terminal.getvalue()
    assert "\r" in drawn  # redrawn in place
    final = drawn.rsplit("\r", 1)[1]
    assert final.startswith("eval: 100%") and "10/10" in final and "attempt/s" in final
    assert final.endswith("\n")  # closed: the shell prompt starts on a new line


def test_a_log_gets_a_line_at_the_start_every_interval_and_at_the_end() -> None:
    log = io.StringIO()
    clock = FakeClock()
    with Progress("replay", "trace", stream=log, every_s=10, clock=clock) as progress:
        for done in range(1, 101):
            clock.now += 0.5  # 2 traces a second: a line every 20 traces
            progress(done, 100)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert lines[0] == "replay: 1/100 traces (1%), 00:00 elapsed"
    assert len(lines) == 1 + 100 // 20
    assert lines[1] == "replay: 21/100 traces (21%), 00:10 elapsed, 2.1 traces/s, about 00:37 left"
    assert lines[-1] == "replay: 100/100 traces (100%), 00:49 elapsed, 2.0 traces/s"


def test_a_job_that_stops_early_writes_how_far_it_got() -> None:
    log = io.StringIO()
    clock = FakeClock()
    try:
        with Progress("judging", "judgement", stream=log, clock=clock) as progress:
            progress(1, 30)
            clock.now += 3
            progress(7, 30)
            raise RuntimeError("budget exhausted")
    except RuntimeError:
        pass
    assert log.getvalue().splitlines()[-1].startswith("judging: 7/30 judgements (23%), 00:03")


def test_calls_from_threads_out_of_order_never_go_backwards() -> None:
    log = io.StringIO()
    clock = FakeClock()
    progress = Progress("scoring", "trace", stream=log, every_s=0, clock=clock)
    progress(5, 10)
    progress(3, 10)  # a slower thread reports an older count
    threads = [threading.Thread(target=progress, args=(n, 10)) for n in range(6, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    progress.close()
    counts = [int(line.split(": ")[1].split("/")[0]) for line in log.getvalue().splitlines()]
    assert counts == sorted(counts) and counts[-1] == 10 and 3 not in counts


def test_plain_line_without_a_total_or_time() -> None:
    assert plain_line("import", "item", 0, 0, 0.0) == "import: 0/0 items, 00:00 elapsed"
