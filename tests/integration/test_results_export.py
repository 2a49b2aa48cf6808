"""`pathgrade up --export-otlp`: every score (review labels, scores written by commands)
and every alert reaches a real OTLP/HTTP logs receiver as a log record parented to its
span, across the receiver's outage (down, then answering 503) and a restart of the stack:
each id arrives (at least once; a repeat is the same record), and nothing delivered is
sent again after the restart."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from pathgrade.batch_plane.scoring.scores import Score, write_scores

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.store_access import open_store
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.otlp_logs import LogsReceiver, ReceivedRecord

pytestmark = pytest.mark.integration

TOKEN = "Bearer s3cret-token"
SCORE_ID, ALERT_KEY = "pathgrade.score.id", "pathgrade.alert.key"


def export_flags(receiver: LogsReceiver) -> list[str]:
    base = receiver.url.removesuffix("/v1/logs")  # a URL without a path gets /v1/logs
    return ["--export-otlp", base, "--export-otlp-header", f"authorization={TOKEN}"]


def send_traffic(http_port: int, traces: int, seed: int) -> None:
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
    send_demo_traces(exporter, traces=traces, seed=seed)


def stored_alerts(stack: PathgradeProcess) -> dict[str, tuple[str, str]]:
    """Alert key -> (trace id, span id) of every stored alert."""
    rows = stack.sql("SELECT AlertKey, TraceId, SpanId FROM alerts_view").rows
    return {key: (trace, span) for key, trace, span in rows}


def distinct_spans(alerts: dict[str, tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """The first `count` different (trace id, span id) of `alerts`, none while fewer: a span
    may hold several alerts, and one scorer's scores of one span share a ScoreId."""
    spans = list(dict.fromkeys(alerts.values()))
    return spans[:count] if len(spans) >= count else []


def stored_scores(stack: PathgradeProcess) -> dict[str, tuple[str, str]]:
    """Score id -> (trace id, span id) of every stored score."""
    rows = stack.sql("SELECT ScoreId, TraceId, SpanId FROM scores FINAL").rows
    return {key: (trace, span) for key, trace, span in rows}


def label(data_dir: Path, trace_id: str, note: str) -> None:
    """A reviewer's label through the running stack (`pathgrade review label`)."""
    done = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "review", "label", trace_id, "--data-dir",
         str(data_dir), "--metric", "task_completion", "--value", "pass", "--note", note],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def judge_scores(data_dir: Path, targets: list[tuple[str, str]], repeat: int = 0) -> list[Score]:
    """Scores as `pathgrade score` and `eval` write them (through the running stack, else
    straight into the store); `repeat` tells them from earlier ones of the same spans."""
    made = [
        Score("faithfulness", "judge:faithfulness", "faithfulness@1", "default", trace,
              value=0.75, label="pass", explanation=f"grounded ({uuid.uuid4().hex[:6]})",
              span_id=span, repeat=repeat)
        for trace, span in targets
    ]  # fmt: skip
    with open_store(data_dir) as store:
        write_scores(store, made)
    return made


def by_id(records: list[ReceivedRecord]) -> dict[str, list[ReceivedRecord]]:
    grouped: dict[str, list[ReceivedRecord]] = {}
    for record in records:
        key = record.attributes.get(SCORE_ID) or record.attributes[ALERT_KEY]
        grouped.setdefault(key, []).append(record)
    return grouped


def test_scores_and_alerts_reach_an_otlp_logs_receiver_across_its_outage_and_a_restart(
    tmp_path: Path,
) -> None:
    receiver = LogsReceiver(required_headers={"authorization": TOKEN})
    stack, _, http_port = start_stack(tmp_path, *export_flags(receiver), "--status-every", "1")
    try:
        assert stack.output_has(f"results out every score and alert as an OTLP log record to "
                                f"{receiver.url}")  # fmt: skip
        send_traffic(http_port, traces=30, seed=1)
        spans = wait_until(lambda: distinct_spans(stored_alerts(stack), 3), 90)
        label(tmp_path, spans[0][0], "reviewed: fine")
        judged = judge_scores(tmp_path, spans)
        scored = stored_scores(stack)
        assert {score.score_id for score in judged} < scored.keys()  # and the label's
        wait_until(
            lambda: set(receiver.ids(SCORE_ID)) >= scored.keys() and receiver.ids(ALERT_KEY), 60
        )

        receiver.down()  # connections refused
        before = set(stored_alerts(stack))
        send_traffic(http_port, traces=30, seed=2)
        during = wait_until(lambda: set(stored_alerts(stack)) - before, 90)
        label(tmp_path, stored_alerts(stack)[next(iter(during))][0], "mail jane@example.com")
        written = judge_scores(tmp_path, [stored_alerts(stack)[key] for key in during])
        wait_until(lambda: stack.output_has("results export to") and stack.output_has("failing"))
        wait_until(lambda: any("failing: " in line for line in stack.lines), 30)
        assert not set(receiver.ids(ALERT_KEY)) & during  # nothing got through meanwhile
        assert not set(receiver.ids(SCORE_ID)) & {score.score_id for score in written}

        receiver.up()  # back, but answering 503 for a while
        receiver.answer_status = 503
        answered = receiver.requests
        wait_until(lambda: receiver.requests >= answered + 2, 30)
        receiver.answer_status = None
        expected_alerts, expected_scores = stored_alerts(stack), stored_scores(stack)
        wait_until(
            lambda: (
                set(receiver.ids(ALERT_KEY)) >= expected_alerts.keys()
                and set(receiver.ids(SCORE_ID)) >= expected_scores.keys()
            ),
            60,
        )
        wait_until(lambda: any("answers again after" in line for line in stack.lines), 10)
    finally:
        assert stack.terminate() == 0, stack.output

    first_run = by_id(receiver.records)
    assert first_run.keys() >= expected_alerts.keys() | expected_scores.keys()
    assert {score.score_id for score in written} <= first_run.keys()

    # A restarted stack resumes at its saved cursors: nothing delivered is sent again, and
    # what was stored meanwhile (a score written while no stack ran) comes now.
    received = len(receiver.records)
    targets = list(expected_alerts.values())
    [offline] = judge_scores(tmp_path, targets[:1], repeat=1)  # into the stopped store
    stack, _, _ = start_stack(tmp_path, *export_flags(receiver))
    try:
        [late] = judge_scores(tmp_path, targets[:1], repeat=2)
        wait_until(lambda: {offline.score_id, late.score_id} <= set(receiver.ids(SCORE_ID)), 60)
        parents = {**stored_alerts(stack), **stored_scores(stack)}
        wait_until(lambda: by_id(receiver.records).keys() >= parents.keys(), 30)
    finally:
        assert stack.terminate() == 0, stack.output
    assert not by_id(receiver.records[received:]).keys() & first_run.keys()

    grouped = by_id(receiver.records)
    assert grouped.keys() == parents.keys()
    for key, records in grouped.items():
        assert all(record == records[0] for record in records), key  # a repeat is the same
        record = records[0]
        assert (record.trace_id, record.span_id) == parents[key]  # parented to its span
        assert record.schema_url == "https://opentelemetry.io/schemas/1.38.0"
        if record.event_name == "gen_ai.evaluation.result":
            assert record.attributes["gen_ai.evaluation.name"] in ("task_completion",
                                                                  "faithfulness")  # fmt: skip
            assert "jane@example.com" not in record.attributes["gen_ai.evaluation.explanation"]
        else:
            assert record.event_name == "pathgrade.alert"
            assert record.attributes["pathgrade.alert.code"].startswith("PG")


def test_the_exporter_box_sends_what_a_running_stack_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pathgrade exporter --data-dir D` beside a `pathgrade up` on D reads through the
    stack's loopback endpoint and keeps its cursors there; headers from the environment."""
    receiver = LogsReceiver(required_headers={"authorization": TOKEN})
    stack, _, http_port = start_stack(tmp_path)
    exporter = None
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization={TOKEN}")
        exporter = PathgradeProcess(
            ["exporter", "--data-dir", str(tmp_path), "--export-otlp", receiver.url,
             "--export-otlp-tenant", "default"],
            ready_text="exporter: scores and alerts ->",
        )  # fmt: skip
        send_traffic(http_port, traces=20, seed=3)
        alerts = wait_until(lambda: stored_alerts(stack), 90)
        written = judge_scores(tmp_path, list(alerts.values())[:2])
        wait_until(lambda: set(receiver.ids(ALERT_KEY)) >= alerts.keys(), 60)
        wait_until(lambda: {s.score_id for s in written} <= set(receiver.ids(SCORE_ID)), 60)
        assert exporter.terminate() == 0, exporter.output
        summary = [line for line in exporter.lines if line.startswith("exported ")]
        counts = re.fullmatch(r"exported (\d+) scores and (\d+) alerts", summary[-1])
        assert counts is not None, summary
        assert int(counts[1]) == len(set(receiver.ids(SCORE_ID)))
        assert int(counts[2]) >= len(alerts)
        saved = stack.sql("SELECT count() FROM export_cursors").rows[0][0]
        assert saved >= 2  # a cursor per source, kept in the stack's store
    finally:
        if exporter is not None and exporter.process.poll() is None:
            exporter.kill()
        assert stack.terminate() == 0, stack.output
    for record in receiver.records:
        parent = alerts.get(record.attributes.get(ALERT_KEY, ""))
        if parent is not None:
            assert (record.trace_id, record.span_id) == parent
