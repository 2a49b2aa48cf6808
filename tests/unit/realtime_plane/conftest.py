"""Fixtures of the realtime plane's unit tests."""

from __future__ import annotations

from collections import defaultdict

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content.otlp import decode_spans_message
from pathgrade.schemas.model import Trace

from pathgrade.demo.scenarios import plan_turns
from pathgrade.demo.sender import send_demo_traces


class _Keep(InMemorySpanExporter):
    def shutdown(self) -> None:  # keep the spans after the demo shuts the provider down
        pass


@pytest.fixture(scope="module")
def demo() -> list[tuple[str, Trace]]:
    """20 demo turns (each production failure once) as (scenario, decoded trace)."""
    exporter = _Keep()
    summary = send_demo_traces(exporter, traces=20, seed=5)
    spans = decode_spans_message(
        encode_spans(exporter.get_finished_spans()).SerializeToString(), "acme", 1
    )
    by_trace = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    scenarios = [turn.scenario for turn in plan_turns(20, seed=5)]
    return [
        (s, Trace("acme", t, by_trace[t]))
        for s, t in zip(scenarios, summary.trace_ids, strict=True)
    ]
