"""The stack's status line and `pathgrade status` report, from counter snapshots."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pathgrade.realtime_plane.delays import P99

from pathgrade.stack.metrics import prometheus_text
from pathgrade.stack.status import (
    plus_earlier,
    snapshot_samples,
    status_line,
    status_report,
    summed,
)
from pathgrade.stack.store_access import StatusUnavailable, stack_status
from pathgrade.stack.store_endpoint import QueryServer


def snapshot(
    at: float, accepted: int, stored: int, evaluated: list[int | None], **extra: Any
) -> dict:
    collector = {"requests": 1, "accepted_spans": accepted, "rejected_spans": 0, "spill_bytes": 0}
    return {
        "taken_at": at,
        "collector": {**collector, **extra.get("collector", {})},
        "store_writer": {"messages": 1, "spans": stored, "inserts": 1, "undecodable_messages": 0,
                         "rejected_spans": extra.get("not_storable", 0)},
        "realtime": [
            None if n is None else {"traces_evaluated": n, "alerts": n // 10, "traces_held": 3}
            for n in evaluated
        ],
        "broker_rss_bytes": extra.get("rss"),
    }  # fmt: skip


def test_line_gives_totals_and_rates_over_the_interval() -> None:
    before = snapshot(100.0, 1_000, 900, [100, 50])
    now = snapshot(110.0, 21_000, 10_900, [2_100, 1_050], rss=200 * 1024 * 1024)
    line = status_line(now, before)
    assert line == (
        "status: in 21,000 spans (2,000/s) | stored 10,900 (1,000/s) | evaluated 3,150 traces "
        "(300/s), 315 alerts, 6 held | broker 200 MB"
    )


def test_no_line_when_nothing_moved_and_a_first_line_without_rates() -> None:
    first = snapshot(100.0, 5, 5, [1])
    assert (
        status_line(first) == "status: in 5 spans | stored 5 | evaluated 1 traces, 0 alerts, 3 held"
    )
    later = snapshot(130.0, 5, 5, [1], rss=1)  # only time and memory changed
    assert status_line(later, first) is None


def test_line_names_what_needs_attention() -> None:
    before = snapshot(0.0, 10, 10, [5, 5])
    now = snapshot(
        10.0, 20, 15, [None, 9],
        collector={"rejected_spans": 2, "spill_bytes": 3 * 1024 * 1024, "dead_letter_messages": 4},
        not_storable=1,
    )  # fmt: skip
    now["store_writer"]["partly_decoded_spans"] = 5
    now["store_writer"]["python_path_messages"] = 6
    line = status_line(now, before)
    assert line is not None
    assert "2 rejected, spill 3.0 MB, 4 dead-lettered (pathgrade dead-letter)" in line
    assert (
        "1 not storable, 5 partly decoded, 6 messages decoded in Python (outside the SQL)" in line
    )
    assert "(1 of 2 realtime processes not answering)" in line
    restarted = snapshot(20.0, 3, 15, [9, 9])  # the collector restarted: no negative rate
    assert "in 3 spans |" in (status_line(restarted, now) or "")
    silent = {**now, "collector": None, "realtime": [None]}
    assert "collector not answering" in (status_line(silent, before) or "")
    assert "realtime not answering" in (status_line(silent, before) or "")


def test_the_final_line_is_labelled_stopped() -> None:
    final = snapshot(10.0, 20, 20, [4])
    assert status_line(final, label="stopped") == (
        "stopped: in 20 spans | stored 20 | evaluated 4 traces, 0 alerts, 3 held"
    )


def test_line_gives_the_slowest_realtime_process_detection_delay() -> None:
    now = snapshot(10.0, 20, 15, [9, 9, None])
    now["realtime"][0][P99] = 1.234
    now["realtime"][1][P99] = 2.75
    assert "6 held, p99 delay 2.8 s (1 of 3" in (status_line(now) or "")
    quiet = snapshot(10.0, 20, 15, [9])  # nothing evaluated on a quiet window yet
    assert "delay" not in (status_line(quiet) or "")


def test_report_lists_every_process() -> None:
    now = snapshot(10.0, 20, 15, [None, 9])
    report = status_report({"snapshot": now, "line": "status: x"}, now=14.4)
    lines = report.splitlines()
    assert lines[0] == "status: x (taken 4 s ago)"
    assert lines[1].split() == ["collector", "accepted_spans=20", "rejected_spans=0",
                                "requests=1", "spill_bytes=0"]  # fmt: skip
    assert lines[3].split() == ["realtime-1", "not", "answering"]
    assert "traces_evaluated=9" in lines[4] and lines[2].lstrip().startswith("store writer")


@pytest.mark.parametrize(
    ("age_s", "shown"),
    [(0.2, "taken 0 s ago"), (59.6, "taken 1 min 0 s ago"), (125, "taken 2 min 5 s ago"),
     (7_260, "taken 2 h 1 min ago")],
)  # fmt: skip
def test_report_says_how_old_the_snapshot_is(age_s: float, shown: str) -> None:
    document = {"snapshot": snapshot(1_000.0, 1, 1, [1]), "line": "status: x"}
    assert status_report(document, now=1_000.0 + age_s).splitlines()[0] == f"status: x ({shown})"


def test_a_restarted_process_counts_on_from_its_predecessors() -> None:
    live = {"accepted_spans": 40_055, "requests": 7, "spill_bytes": 10}
    earlier = {"accepted_spans": 19_945, "requests": 3}
    assert plus_earlier(live, earlier) == {
        "accepted_spans": 60_000, "requests": 10, "spill_bytes": 10,  # a gauge: as it is
    }  # fmt: skip
    assert plus_earlier(None, earlier) is None and plus_earlier(live, {}) is live


def test_status_of_a_directory_without_a_running_stack_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StatusUnavailable, match="no running `pathgrade up`"):
        stack_status(tmp_path)
    (tmp_path / "stack.json").write_text('{"query_url": "http://127.0.0.1:9"}')
    with pytest.raises(StatusUnavailable, match=r"did not answer.*is it running"):
        stack_status(tmp_path)


def test_status_is_served_by_the_store_owners_endpoint_once_taken(tmp_path: Path) -> None:
    server = QueryServer(store=None)  # type: ignore[arg-type]  # /status reads no store
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        (tmp_path / "stack.json").write_text(json.dumps({"query_url": server.url}))
        with pytest.raises(StatusUnavailable, match="needs the owner's token"):
            stack_status(tmp_path)
        state = {"query_url": server.url, "token": server.token}
        (tmp_path / "stack.json").write_text(json.dumps(state))
        with pytest.raises(StatusUnavailable, match="no status yet"):
            stack_status(tmp_path)
        document = {"snapshot": snapshot(1.0, 2, 2, [1]), "line": "status: in 2 spans"}
        server.status = document
        assert stack_status(tmp_path) == document
    finally:
        server.shutdown()
        server.server_close()


def test_counter_sets_add_key_by_key_and_skip_what_is_not_a_count() -> None:
    assert summed([{"a": 1, "b": 2, "note": "x"}, {"a": 3, "c": 0}, {}]) == {"a": 4, "b": 2, "c": 0}
    assert summed([]) == {}


def test_line_report_and_metrics_say_what_is_stalled_and_what_was_restarted() -> None:
    from pathgrade.stack.metrics import prometheus_text
    from pathgrade.stack.status import snapshot_samples

    before = snapshot(0.0, 10, 10, [5])
    now = snapshot(
        2.0, 10, 10, [5],
        collector={"write_failures": 3,
                   "stalled": {"the durable log": "[Errno 28] No space left on device"}},
    )  # fmt: skip
    now["store_writer"]["stalled"] = {"the store": "Code: 243. NOT_ENOUGH_SPACE"}
    now["restarts"] = {"broker": 1, "collector": 2}
    line = status_line(now, before)  # nothing counted moved, yet the stalls are news
    assert line is not None and line.endswith(
        " | restarted broker 1x, collector 2x"
        " | stalled: the durable log ([Errno 28] No space left on device);"
        " the store (Code: 243. NOT_ENOUGH_SPACE)"
    )
    report = status_report({"snapshot": now, "line": line}, now=3.0)
    assert "write_failures=3" in report and "{" not in report  # the stalls are in its line
    text = prometheus_text(snapshot_samples(now))
    assert 'pathgrade_collector_stalled{what="the durable log"} 1\n' in text
    assert 'pathgrade_store_writer_stalled{what="the store"} 1\n' in text
    assert "pathgrade_collector_write_failures_total 3\n" in text
    assert 'pathgrade_stack_restarts_total{process="broker"} 1\n' in text
    healed = snapshot(4.0, 10, 10, [5], collector={"write_failures": 3, "stalled": {}})
    assert "stalled" not in (status_line(healed, now) or "")


def test_line_counts_forged_messages_each_consumer_refused() -> None:
    quiet = snapshot(0.0, 10, 10, [5])
    assert "forged" not in (status_line(quiet) or "")
    forged = snapshot(10.0, 10, 10, [5])
    forged["store_writer"]["forged_messages"] = 3
    forged["realtime"][0]["forged_messages"] = 4
    line = status_line(forged, quiet) or ""
    assert line.endswith("| forged messages refused: store writer 3, realtime 4")


def test_the_results_exporter_shows_in_the_line_the_report_and_the_metrics() -> None:
    exporter = {"exported_scores": 1_200, "exported_alerts": 30, "requests": 9, "retries": 0,
                "refused": 0, "rejected": 0, "resent_late": 0, "failing": 0,
                "latest_error": ""}  # fmt: skip
    now = {**snapshot(10.0, 20, 15, [9]), "exporter": exporter}
    assert (status_line(now) or "").endswith("| exported 1,200 scores, 30 alerts")
    failing = {**exporter, "retries": 4, "refused": 2, "failing": 1,
               "latest_error": "ConnectError: [Errno 111] Connection refused"}  # fmt: skip
    line = status_line({**now, "exporter": failing}, now) or ""
    assert line.endswith(
        "| exported 1,200 scores, 30 alerts, 2 given up, failing: ConnectError: [Errno 111] "
        "Connection refused (retrying; nothing is dropped)"
    )
    report = status_report({"snapshot": {**now, "exporter": failing}, "line": line}, now=11.0)
    assert "  exporter      exported_alerts=30 exported_scores=1200 failing=1" in report
    metrics = prometheus_text(snapshot_samples({**now, "exporter": failing}))
    assert "pathgrade_exporter_exported_scores_total 1200" in metrics
    assert "# TYPE pathgrade_exporter_failing gauge\npathgrade_exporter_failing 1" in metrics
    assert "exporter" not in (status_line(snapshot(10.0, 20, 15, [9])) or "")


def test_the_store_writers_declines_add_up_by_reason_and_are_a_labelled_series() -> None:
    """The SQL insert's declines by reason (`StoreWriterStats.declines`) add up across the
    writers a stack ran (broker swaps) and are exported by reason."""
    earlier = {"python_path_messages": 3, "declines": {"span attributes": 2, "flattened": 1}}
    now = {"python_path_messages": 1, "declines": {"span attributes": 1}}
    total = summed([earlier, now])
    assert total == {"python_path_messages": 4,
                     "declines": {"span attributes": 3, "flattened": 1}}  # fmt: skip
    assert earlier["declines"] == {"span attributes": 2, "flattened": 1}  # left as it was
    text = prometheus_text(snapshot_samples({**snapshot(1, 1, 1, [1]), "store_writer": total}))
    assert 'pathgrade_store_writer_declined_messages_total{reason="span attributes"} 3' in text
