"""What the health page and the red banner say from status snapshots: stalls at once,
with why; stopped stages once STALL_S passed."""

from __future__ import annotations

from pathgrade.web.health import problems, processes, stalls_in


def snapshot(at: float, accepted: int, stored: int, **stalled: dict[str, str]) -> dict:
    return {
        "taken_at": at,
        "collector": {"accepted_spans": accepted, "stalled": stalled.get("collector", {})},
        "store_writer": {"spans": stored, "stalled": stalled.get("store_writer", {})},
        "realtime": [{"traces_evaluated": accepted}],
    }


def test_a_stall_is_named_with_why_at_once_and_gone_once_cleared() -> None:
    full = snapshot(
        1.0, 10, 10,
        collector={"the durable log": "[Errno 28] No space left on device"},
        store_writer={"the store": "Code: 243. NOT_ENOUGH_SPACE"},
    )  # fmt: skip
    assert problems(full, None) == [
        "stalled: the durable log ([Errno 28] No space left on device)",
        "stalled: the store (Code: 243. NOT_ENOUGH_SPACE)",
    ]
    assert problems(snapshot(40.0, 10, 10), full) == []


def test_a_stall_comes_before_the_stop_it_explains() -> None:
    before = snapshot(0.0, 100, 100)
    now = snapshot(40.0, 180, 100, store_writer={"the store": "Code: 243. NOT_ENOUGH_SPACE"})
    assert problems(now, before) == [
        "stalled: the store (Code: 243. NOT_ENOUGH_SPACE)",
        "storing has stopped: 80 spans arrived, none was stored",
    ]


def test_a_scraped_box_says_that_it_is_stalled() -> None:
    """A production box's /metrics read back (`scraped_status`, which keeps no labels)."""
    from pathgrade.stack.metrics import labelled_samples, prometheus_text
    from pathgrade.web.scraped_status import parse_metrics

    counters = {"accepted_spans": 1, "stalled": {"the spill": "[Errno 28] No space left"}}
    scraped = parse_metrics(prometheus_text(labelled_samples("collector", {}, counters)))
    assert stalls_in(scraped) == ["the collector (its /metrics names what it waits for)"]
    assert stalls_in(parse_metrics(prometheus_text([("collector", {}, {"spans": 1})]))) == []


def test_the_processes_table_lists_numbers_only() -> None:
    full = snapshot(1.0, 10, 10, collector={"the durable log": "full"})
    collector, writer, _ = processes(full)
    assert collector.counters == {"accepted_spans": 10}
    assert writer.counters == {"spans": 10}
