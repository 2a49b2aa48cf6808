"""`pathgrade scorer --data-dir` on a stack whose bundled broker is swapped: each swap starts
the fresh broker on a new port, and the scorer follows it there (`stack.json`), so traces
sampled after the swap are scored too."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.test_resilience import wait_for_the_swap

pytestmark = pytest.mark.integration


@pytest.mark.timeout(900)  # a loaded machine sends the 3,000 traces slowly
def test_the_scorer_follows_the_bundled_broker_to_the_fresh_one(tmp_path: Path) -> None:
    stack, _, http_port = start_stack(tmp_path, "--broker-max-mb", "24", "--status-every", "1")
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    first_broker = json.loads((tmp_path / "stack.json").read_text())["kafka"]
    scorer = PathgradeProcess(["scorer", "--data-dir", str(tmp_path)], ready_text="scorer:")
    try:
        assert scorer.output_has(f"scorer: {first_broker} pathgrade.sampled")
        sending = threading.Thread(
            target=lambda: send_demo_traces(
                OTLPSpanExporter(endpoint=url, timeout=60), traces=3000, seed=14
            )
        )
        sending.start()
        wait_for_the_swap(stack, sending)
        sending.join(timeout=300)
        fresh_broker = json.loads((tmp_path / "stack.json").read_text())["kafka"]
        assert fresh_broker != first_broker
        after = send_demo_traces(OTLPSpanExporter(endpoint=url), traces=100, seed=15)
        ids = ",".join(f"'{t}'" for t in after.trace_ids)
        scored_after = f"SELECT uniqExact(TraceId) FROM scores WHERE TraceId IN ({ids})"
        wait_until(lambda: stack.scalar(scored_after) > 0, timeout_s=120)
        assert scorer.output_has(f"scorer: {fresh_broker} pathgrade.sampled")
    finally:
        assert scorer.terminate() == 0, scorer.output
        assert stack.terminate() == 0, stack.output
    summary = re.search(r"scored (\d+) of (\d+) sampled traces", scorer.output)
    assert summary and int(summary[1]) > 0, scorer.output
