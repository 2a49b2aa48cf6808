"""The realtime plane's hand-over to a fresh broker (the embedded stack's swap of its
bundled one): it joins its group on the fresh broker beside its consumer of the old one
(`prepare`), so that when it moves (`hand_over`) it holds its partitions there at once,
with no group join to wait for; it reads the old broker up to the offsets it is given and
the fresh one from its start, each span once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import DEFAULT_PARTITIONS, LocalBroker
from tests.integration.conftest import (
    PathgradeProcess,
    local_broker,
    start_collector,
    wait_until,
)
from tests.support.topics import read_topic_to_end

pytestmark = pytest.mark.integration

ALL = set(range(DEFAULT_PARTITIONS))


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[LocalBroker]:
    """A second Tansu broker, with pathgrade's topics: the one handed over to."""
    with local_broker(tmp_path / "fresh.log") as local:
        yield local


def traces_url(bootstrap: str, spill_dir: Path) -> tuple[PathgradeProcess, str]:
    """A `pathgrade collector` into `bootstrap`; the process and its traces URL."""
    process, _, http_port = start_collector(bootstrap, spill_dir, "--capture-tools", "*")
    return process, f"http://127.0.0.1:{http_port}/v1/traces"


def next_offsets(bootstrap: str) -> dict[int, int]:
    """Partition -> the offset after the last message the spans topic holds."""
    out: dict[int, int] = {}
    for message in read_topic_to_end(bootstrap, SPANS_TOPIC):
        out[message.partition] = max(out.get(message.partition, 0), message.offset + 1)
    return out


def test_a_plane_handed_over_holds_its_partitions_on_the_fresh_broker_at_once(
    broker: LocalBroker, fresh: LocalBroker, tmp_path: Path
) -> None:
    old_collector, old_url = traces_url(broker.bootstrap, tmp_path / "spill-old")
    new_collector, new_url = traces_url(fresh.bootstrap, tmp_path / "spill-new")
    plane = RealtimePlane(RealtimeConfig(bootstrap_servers=broker.bootstrap))
    plane.start()
    try:
        before = send_demo_traces(OTLPSpanExporter(endpoint=old_url), traces=20, seed=21)
        wait_until(lambda: plane.counters()["spans"] == before.spans, timeout_s=60)
        assert plane.prepare(fresh.bootstrap)  # joined beside the consumer of the old one
        # the collector moves at once: spans reach the fresh broker before the readers do
        after = send_demo_traces(OTLPSpanExporter(endpoint=new_url), traces=20, seed=22)
        targets = next_offsets(broker.bootstrap)
        assert plane.hand_over(targets) == targets.keys()
        assert plane.assigned == ALL  # held at once: no group join on the fresh broker
        total = before.spans + after.spans
        wait_until(lambda: plane.counters()["spans"] == total, timeout_s=60)
        wait_until(lambda: plane.counters()["traces_evaluated"] >= 40, timeout_s=60)
        assert plane.counters()["spans"] == total  # each span read once, none skipped
    finally:
        plane.stop()
        assert old_collector.terminate() == 0, old_collector.output
        assert new_collector.terminate() == 0, new_collector.output
