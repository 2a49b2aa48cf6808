"""Two `pathgrade realtime` consumers in one group, against the real broker, a real
collector, the official OTLP exporter and one store owned by a `pathgrade store-writer`:
they split the partitions and every finding is raised once: published once on
`pathgrade.alerts` (read to its end once both stopped, no waiting for quiet) and stored."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pathgrade.content.otlp import decode_resource_spans
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import DueTurn
from pathgrade.realtime_plane.evaluate import TurnEvaluator
from pathgrade.schemas.alerts import Alert
from pathgrade.schemas.model import Trace
from pathgrade.schemas.topics import ALERTS_TOPIC, DEFAULT_TENANT

from pathgrade.demo.scenarios import FAILURE_SCENARIOS, plan_turns
from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import DEFAULT_PARTITIONS, LocalBroker
from tests.integration import test_realtime
from tests.integration.conftest import PathgradeProcess, wait_until
from tests.support.topics import read_topic_to_end

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


def closing_count(process: PathgradeProcess, what: str) -> int:
    """A count from the consumer's closing line: `evaluated` traces, `alerts` raised."""
    (line,) = [line for line in process.lines if line.startswith("realtime stopped:")]
    match = re.search(rf"(\d+) {what}\b", line)
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

        def stored() -> set[tuple[str, str]]:
            return {(t, c) for t, c in owner.sql("SELECT TraceId, Code FROM alerts_view").rows}

        wait_until(lambda: stored() >= expected, timeout_s=45)
        for consumer in consumers:
            consumer.terminate()  # each flushes what it raised
        # The view keeps one row per alert key however often one was raised: count on the
        # topic, read to its end now that both consumers are done.
        published = read_topic_to_end(broker.bootstrap, ALERTS_TOPIC)
        rows = stored()
    finally:
        codes = [c.terminate() for c in consumers]
        assert owner.terminate() == 0, owner.output
    assert codes == [0, 0], [c.output for c in consumers]
    alerts = [Alert.from_json(m.value) for m in published]
    assert [key for key, n in Counter(a.alert_key for a in alerts).items() if n > 1] == []
    assert {(a.trace_id, a.code) for a in alerts} == expected == rows
    raised = [closing_count(c, "alerts") for c in consumers]
    assert sum(raised) == len(alerts), raised  # none raised twice, none left unpublished
    evaluated = [closing_count(c, "evaluated") for c in consumers]
    assert all(evaluated) and sum(evaluated) >= TRACES, evaluated  # both did part of the work
