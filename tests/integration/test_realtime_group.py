"""Two `pathgrade realtime` consumers in one group, against the real broker, a real
collector, the official OTLP exporter and one store owned by a `pathgrade store-writer`:
they split the partitions and every finding lands in `alerts_view` exactly once."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas.model import Trace
from pathgrade.schemas.otlp import decode_resource_spans
from pathgrade.schemas.topics import DEFAULT_TENANT

from pathgrade.demo.scenarios import FAILURE_SCENARIOS, plan_turns
from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import DEFAULT_PARTITIONS, LocalBroker
from tests.integration import test_realtime
from tests.integration.conftest import PathgradeProcess, wait_until

pytestmark = pytest.mark.integration

collector = test_realtime.collector  # the fixture: a `pathgrade collector` keeping tool args
TRACES = 40
ASSIGNED = re.compile(r"realtime: assigned partitions ([\d,]+|none)$")


class Tee(SpanExporter):
    """Exports to `inner` and keeps every span it exported."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return self.inner.export(spans)

    def shutdown(self) -> None:
        self.inner.shutdown()


def expected_findings(spans: list[ReadableSpan], trace_order: list[str]) -> set[tuple[str, str]]:
    """(trace id, code) of every alert one in-process evaluator raises on these traces."""
    decoded = decode_resource_spans(encode_spans(spans).resource_spans, DEFAULT_TENANT, 0)
    by_trace: dict[str, list] = {}
    for span in decoded:
        by_trace.setdefault(span.trace_id, []).append(span)
    evaluator = TurnEvaluator(load_policy(None))
    found = set()
    for trace_id in trace_order:
        due = DueTurn(Trace(DEFAULT_TENANT, trace_id, by_trace[trace_id]), "quiet", False)
        found |= {(a.trace_id, a.code) for a in evaluator.evaluate(due, 0).new_alerts}
    return found


def assignment(process: PathgradeProcess) -> set[int]:
    """The partitions the consumer last reported."""
    reported = [m[1] for line in process.lines if (m := ASSIGNED.search(line))]
    return (
        set() if not reported or reported[-1] == "none" else set(map(int, reported[-1].split(",")))
    )


def evaluated_count(process: PathgradeProcess) -> int:
    """Traces the consumer evaluated, from its closing line."""
    (line,) = [line for line in process.lines if line.startswith("realtime stopped:")]
    match = re.search(r"(\d+) evaluated", line)
    assert match, line
    return int(match[1])


def test_two_consumers_split_partitions_and_alert_each_finding_once(
    broker: LocalBroker, collector: str, tmp_path: Path
) -> None:
    data_dir = tmp_path / "store"
    owner = PathgradeProcess(
        ["store-writer", "--kafka", broker.bootstrap, "--data-dir", str(data_dir)],
        ready_text="store writer:",
        data_dir=data_dir,
    )
    args = ["realtime", "--kafka", broker.bootstrap, "--data-dir", str(data_dir)]
    consumers = [PathgradeProcess(args, ready_text="realtime:") for _ in range(2)]
    try:
        wait_until(
            lambda: (
                all(assignment(c) for c in consumers)
                and sorted(p for c in consumers for p in assignment(c))
                == list(range(DEFAULT_PARTITIONS))
            ),
            timeout_s=45,
        )
        tee = Tee(OTLPSpanExporter(endpoint=collector))
        sent = send_demo_traces(tee, traces=TRACES, seed=11)
        expected = expected_findings(tee.spans, sent.trace_ids)
        failing = {
            t for t, turn in zip(sent.trace_ids, plan_turns(TRACES, 11), strict=True)
            if turn.scenario in FAILURE_SCENARIOS
        }  # fmt: skip
        assert failing <= {trace for trace, _ in expected}  # the expectation has teeth

        def stored() -> list[tuple[str, str, int]]:
            return owner.sql(
                "SELECT TraceId, Code, count() FROM alerts_view GROUP BY AlertKey, TraceId, Code"
            ).rows

        wait_until(lambda: {(t, c) for t, c, _ in stored()} >= expected, timeout_s=45)
        time.sleep(2)  # let any late duplicate land before counting
        rows = stored()
    finally:
        codes = [c.terminate() for c in consumers]
        assert owner.terminate() == 0, owner.output
    assert codes == [0, 0], [c.output for c in consumers]
    assert [count for *_, count in rows if count != 1] == []
    assert {(t, c) for t, c, _ in rows} == expected
    evaluated = [evaluated_count(c) for c in consumers]
    assert all(evaluated) and sum(evaluated) >= TRACES, evaluated  # both did part of the work
