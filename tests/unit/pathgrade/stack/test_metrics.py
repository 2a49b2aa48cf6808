"""Prometheus text from counters, checked with the official client's own parser."""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from pathgrade.realtime_plane.delays import P99
from prometheus_client.parser import text_string_to_metric_families

from pathgrade.cli.support import CliError, served_metrics
from pathgrade.stack.metrics import (
    CONTENT_TYPE,
    MetricsServer,
    labelled_samples,
    parse_listen,
    prometheus_text,
)
from pathgrade.stack.status import snapshot_samples


def parsed(text: str) -> dict[str, tuple[str, list[tuple[dict, float]]]]:
    """name -> (type, [(labels, value)]) as Prometheus reads `text`."""
    return {
        family.name: (family.type, [(s.labels, s.value) for s in family.samples])
        for family in text_string_to_metric_families(text)
    }


def test_counts_are_counters_levels_are_gauges_and_non_numbers_are_skipped() -> None:
    text = prometheus_text(
        [("collector", {}, {"accepted_spans": 12, "spill_bytes": 4096, "latest": "x", "ok": True})]
    )
    families = parsed(text)
    # The client names a counter family without its _total suffix.
    assert families == {
        "pathgrade_collector_accepted_spans": ("counter", [({}, 12.0)]),
        "pathgrade_collector_spill_bytes": ("gauge", [({}, 4096.0)]),
    }
    assert "pathgrade_collector_accepted_spans_total 12\n" in text


def test_detection_delays_are_gauges_in_seconds() -> None:
    text = prometheus_text([("realtime", {"worker": "1"}, {P99: 1.25, "alerts": 3})])
    assert parsed(text)["pathgrade_realtime_detection_delay_p99_seconds"] == (
        "gauge",
        [({"worker": "1"}, 1.25)],
    )


def test_a_stack_snapshot_labels_each_realtime_worker_once_per_family() -> None:
    snapshot = {
        "taken_at": 1.0,
        "collector": None,  # did not answer: no samples rather than zeros
        "store_writer": {"spans": 7, "inserts": 1},
        "realtime": [{"traces_evaluated": 3, "traces_held": 1}, None, {"traces_evaluated": 5}],
        "broker_rss_bytes": 2048,
    }
    families = parsed(prometheus_text(snapshot_samples(snapshot)))
    assert families["pathgrade_realtime_traces_evaluated"] == (
        "counter", [({"worker": "1"}, 3.0), ({"worker": "3"}, 5.0)],
    )  # fmt: skip
    assert families["pathgrade_realtime_traces_held"] == ("gauge", [({"worker": "1"}, 1.0)])
    assert families["pathgrade_broker_rss_bytes"] == ("gauge", [({}, 2048.0)])
    assert families["pathgrade_store_writer_spans"] == ("counter", [({}, 7.0)])
    assert not any(name.startswith("pathgrade_collector") for name in families)


def test_turns_by_monitor_counter_are_one_counter_family_labelled_by_where_and_what() -> None:
    rows = [
        {"tenant": "acme", "service": "billing", "agent": "a", "counter": "turns", "turns": 40},
        {"tenant": "acme", "service": "billing", "agent": "a", "counter": "tool_error",
         "turns": 3},
    ]  # fmt: skip
    samples = labelled_samples("realtime", {}, {"alerts": 1, "monitor_turns": rows})
    family = parsed(prometheus_text(samples))["pathgrade_realtime_monitor_turns"]
    where = {"tenant": "acme", "service": "billing", "agent": "a"}
    assert family == (
        "counter",
        [({**where, "counter": "turns"}, 40.0), ({**where, "counter": "tool_error"}, 3.0)],
    )


def test_label_values_are_escaped() -> None:
    odd = 'a "quoted" back\\slash\nnewline'
    families = parsed(prometheus_text([("realtime", {"worker": odd}, {"alerts": 1})]))
    assert families["pathgrade_realtime_alerts"][1] == [({"worker": odd}, 1.0)]


def test_server_answers_metrics_and_nothing_else() -> None:
    calls = iter(["pathgrade_x_total 1\n", RuntimeError("boom")])

    def collect() -> str:
        answer = next(calls)
        if isinstance(answer, Exception):
            raise answer
        return answer

    server = MetricsServer("127.0.0.1", 0, collect)
    server.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
            assert response.headers["Content-Type"] == CONTENT_TYPE
            assert response.read() == b"pathgrade_x_total 1\n"
        for path, code in (("/metrics", 500), ("/", 404)):
            with pytest.raises(urllib.error.HTTPError) as failure:
                urllib.request.urlopen(base + path, timeout=10)
            assert failure.value.code == code
    finally:
        server.stop()


def test_listen_addresses_are_checked() -> None:
    assert parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert parse_listen("[::1]:9464") == ("::1", 9464)
    for bad in ("9464", "host:", "host:port", "host:70000"):
        with pytest.raises(ValueError, match="expected HOST:PORT"):
            parse_listen(bad)
    refused = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "collector", "--kafka", "127.0.0.1:1",
         "--metrics-listen", "nonsense"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "argument --metrics-listen: 'nonsense': expected HOST:PORT" in refused.stderr


def test_a_port_in_use_is_a_clear_error_and_the_server_stops_after_the_block() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        refused = pytest.raises(CliError, match=f"cannot serve metrics on 127.0.0.1:{port}")
        with refused, served_metrics(("127.0.0.1", port), "collector", dict):
            pass
    finally:
        taken.close()
    url = f"http://127.0.0.1:{port}/metrics"
    counters = {"accepted_spans": 1}
    with served_metrics(("127.0.0.1", port), "collector", lambda: counters), \
            urllib.request.urlopen(url, timeout=10) as answer:  # fmt: skip
        assert b"pathgrade_collector_accepted_spans_total 1" in answer.read()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=10)
