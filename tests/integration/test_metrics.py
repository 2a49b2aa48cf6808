"""A production collector serves its counters to Prometheus while it ingests."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from prometheus_client.parser import text_string_to_metric_families

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker, free_port
from tests.integration.conftest import PathgradeProcess, start_collector

pytestmark = pytest.mark.integration


def scrape(url: str) -> dict[str, float]:
    """Sample name -> value of an unlabelled /metrics answer."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_collector_metrics_count_the_accepted_spans(broker: LocalBroker, tmp_path: Path) -> None:
    port = free_port()
    collector, _, http_port = start_collector(
        broker.bootstrap, tmp_path / "spill", "--metrics-listen", f"127.0.0.1:{port}"
    )
    try:
        metrics = f"http://127.0.0.1:{port}/metrics"
        assert scrape(metrics)["pathgrade_collector_accepted_spans_total"] == 0
        sent = send_demo_traces(
            OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces"), traces=10, seed=1
        )
        after = scrape(metrics)
        assert after["pathgrade_collector_accepted_spans_total"] == sent.spans
        assert after["pathgrade_collector_rejected_spans_total"] == 0
        assert after["pathgrade_collector_spill_bytes"] == 0
    finally:
        assert collector.terminate() == 0, collector.output


@pytest.mark.parametrize(
    ("command", "ready", "metric"),
    [
        (["store-writer"], "store writer: ", "pathgrade_store_writer_spans_total"),
        (
            ["realtime", "--no-shared-history"], "realtime: ",
            "pathgrade_realtime_traces_evaluated_total",
        ),
        (["scorer"], "scorer: ", "pathgrade_scorer_messages_total"),
    ],
    ids=["store-writer", "realtime", "scorer"],
)  # fmt: skip
def test_every_production_box_serves_its_metrics(
    broker: LocalBroker, tmp_path: Path, command: list[str], ready: str, metric: str
) -> None:
    migrated = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "migrate", "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip  # the scorer needs an existing store
    assert migrated.returncode == 0, migrated.stderr
    port = free_port()
    box = PathgradeProcess(
        [*command, "--kafka", broker.bootstrap, "--data-dir", str(tmp_path),
         "--metrics-listen", f"127.0.0.1:{port}"],
        ready_text=ready,
    )  # fmt: skip
    try:
        assert scrape(f"http://127.0.0.1:{port}/metrics")[metric] == 0
    finally:
        assert box.terminate() == 0, box.output
