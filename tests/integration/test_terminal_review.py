"""The terminal of `pathgrade up --demo` and the review queue, on one running stack:
short alert lines whose trace links answer, a summary of the alerts not shown, then
`review list` -> `review label` -> `review export` -> `judge calibrate` with the judge
stand-in (scripted to agree with the reviewer on some traces and not on others)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode
from pathgrade.schemas import genai

from pathgrade.stack.store_access import stack_status
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.support.openai_standin import OpenAIStandIn

pytestmark = pytest.mark.integration

ALERT_LINE = re.compile(
    r"^\d\d:\d\d:\d\d (low|medium|high|critical) +PG\d{3} \S+: .+  "
    r"(http://127\.0\.0\.1:\d+/trace/[0-9a-f]{32}(?:\?span=[0-9a-f]{16})?)$"
)
SUMMARY_LINE = re.compile(r"^\+(\d+) alerts? in the last \d+ s not shown: PG\d{3} x\d+")
FAILING_TRACES = 30  # at once: more than the terminal's burst, so some are summarised
REVIEWED = {"lookup_alpha": "fail", "lookup_bravo": "4", "lookup_charlie": "1"}
"""Tool of each trace with negative feedback -> the reviewer's task_completion label."""
JUDGE_SCORES = {"lookup_alpha": 1, "lookup_bravo": 4, "lookup_charlie": 3}
"""What the stand-in judge says of each: agrees on alpha (fail) and bravo (pass), passes
charlie, which the reviewer failed."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PathgradeProcess, int]]:
    data_dir = tmp_path_factory.mktemp("terminal")
    process, _, http_port = start_stack(
        data_dir, "--demo", "--no-demo-pages", "--status-every", "2"
    )
    try:
        yield process, http_port
    finally:
        assert process.terminate() == 0, process.output


def send_traces(http_port: int, tools: list[str], fail: bool, feedback: str = "") -> list[str]:
    """One agent turn per tool (one tool call each) through the official OTLP/HTTP
    exporter; the tool fails when `fail`; the root carries `feedback` when given."""
    provider = TracerProvider(resource=Resource.create({"service.name": "review-agent"}))
    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test_terminal_review")
    trace_ids = []
    for tool in tools:
        with tracer.start_as_current_span("invoke_agent review") as root:
            root.set_attributes({genai.OPERATION_NAME: "invoke_agent", genai.AGENT_NAME: "review"})
            if feedback:
                root.set_attribute(genai.PG_FEEDBACK, feedback)
            with tracer.start_as_current_span(f"execute_tool {tool}") as span:
                span.set_attributes({genai.OPERATION_NAME: "execute_tool", genai.TOOL_NAME: tool})
                if fail:
                    span.set_status(Status(StatusCode.ERROR, "503"))
        trace_ids.append(f"{root.get_span_context().trace_id:032x}")
    provider.shutdown()
    return trace_ids


def pathgrade(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def status_code(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def alerts_raised_after(process: PathgradeProcess, moment: float) -> int | None:
    """The alerts the realtime processes raised, from a status snapshot taken after
    `moment` (None until there is one): every alert printed before `moment` is counted."""
    assert process.data_dir is not None
    snapshot = stack_status(process.data_dir)["snapshot"]
    if snapshot["taken_at"] <= moment:
        return None
    return sum(worker["alerts"] for worker in snapshot["realtime"] if worker)


def test_up_demo_prints_short_alert_lines_linked_to_their_traces_and_a_summary(stack) -> None:
    process, http_port = stack
    banner = process.output
    assert "  demo        ON: demo agent traffic" in banner
    assert "Where to look:" in banner and "  browser     http://127.0.0.1:" in banner
    assert f"pathgrade status --data-dir {process.data_dir}" in banner
    send_traces(http_port, [f"flaky_{n}" for n in range(FAILING_TRACES)], fail=True)
    summaries = wait_until(
        lambda: [m for line in process.lines if (m := SUMMARY_LINE.match(line))], 90
    )
    alert_lines = [m for line in process.lines if (m := ALERT_LINE.match(line))]
    read_at = time.time()
    assert alert_lines and not [line for line in process.lines if line.startswith("alert {")]
    assert all(len(m[0]) < 250 for m in alert_lines)
    assert any("?span=" in m[2] for m in alert_lines)  # the alerted span, selected
    held = sum(int(m[1]) for m in summaries)
    raised = wait_until(lambda: alerts_raised_after(process, read_at), 60)
    assert held >= 1 and len(alert_lines) + held <= raised  # each alert shown or counted once
    wait_until(lambda: process.scalar("SELECT count() FROM alerts FINAL") >= raised, 60)
    first_alert = next(n for n, line in enumerate(process.lines) if ALERT_LINE.match(line))
    # status lines keep coming between the alert lines (paced like the summaries: wait)
    wait_until(
        lambda: any(line.startswith("status: in ") for line in process.lines[first_alert:]), 60
    )
    for url in {m[2] for m in alert_lines[:3]}:  # stored a moment after the alert
        wait_until(lambda url=url: status_code(url) == 200, 60)


def judge_answer(request: dict[str, Any]) -> dict[str, Any]:
    """The stand-in judge's task_completion verdict, by the tool named in the prompt."""
    prompt = json.dumps(request["messages"])
    (tool,) = [tool for tool in JUDGE_SCORES if tool in prompt]
    return {"score": JUDGE_SCORES[tool], "explanation": f"stand-in on {tool}"}


def test_review_label_export_and_calibrate_the_judge(stack, tmp_path: Path) -> None:
    process, http_port = stack
    data_dir = process.data_dir
    assert data_dir is not None
    tools = list(REVIEWED)
    trace_ids = dict(zip(tools, send_traces(http_port, tools, False, "thumbs_down"), strict=True))
    (liked,) = send_traces(http_port, ["lookup_delta"], fail=False, feedback="positive")

    def queue(*extra: str) -> list[dict[str, Any]]:
        listed = pathgrade(
            data_dir, "review", "list", "--format", "json", "--limit", "5000", *extra
        )
        assert listed.returncode == 0, listed.stderr
        return [json.loads(line) for line in listed.stdout.splitlines()]

    waiting = wait_until(
        lambda: {i["trace_id"]: i for i in queue()}.keys() >= set(trace_ids.values()) and queue()
    )
    by_trace = {item["trace_id"]: item for item in waiting}
    assert [by_trace[t]["reasons"] for t in trace_ids.values()] == [["negative feedback"]] * 3
    assert liked not in by_trace  # positive feedback and no alert: not routed to review
    assert any(r.startswith("PG") for item in waiting for r in item["reasons"])  # alerted ones
    starts = [item["started_at_ns"] for item in waiting]
    assert starts == sorted(starts)  # oldest first

    bad = pathgrade(
        data_dir, "review", "label", trace_ids["lookup_alpha"], "--metric", "task_completion",
        "--value", "9",
    )  # fmt: skip
    assert bad.returncode == 2 and "--value: 9 is outside the task_completion@1 scale" in bad.stderr
    for tool, value in REVIEWED.items():
        labelled = pathgrade(
            data_dir, "review", "label", trace_ids[tool], "--metric", "task_completion",
            "--value", value, "--note", f"reviewed {tool}",
        )  # fmt: skip
        assert labelled.returncode == 0, labelled.stderr
    rows = process.sql(
        "SELECT TraceId, Label, Value, Scorer, Explanation, SpanId != '' FROM scores FINAL "
        "WHERE Metric = 'task_completion' AND Scorer = 'human' ORDER BY Explanation"
    ).rows
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in rows] == [
        (trace_ids[tool], label, "human", f"reviewed {tool}", 1)
        for tool, label in [("lookup_alpha", "fail"), ("lookup_bravo", "pass"),
                            ("lookup_charlie", "fail")]
    ]  # fmt: skip
    assert [r[2] for r in rows] == [0.0, 1.0, 0.0]
    still_waiting = {item["trace_id"] for item in queue("--metric", "task_completion")}
    assert not still_waiting & set(trace_ids.values())  # labelled: out of the queue
    assert set(trace_ids.values()) <= {i["trace_id"] for i in queue("--metric", "faithfulness")}

    labels = tmp_path / "labels.jsonl"
    exported = pathgrade(
        data_dir, "review", "export", "--metric", "task_completion", "--since", "1h",
        "--out", str(labels),
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    items = [json.loads(line) for line in labels.read_text().splitlines()]
    assert {i["item_id"]: i["label"] for i in items} == {
        trace_ids["lookup_alpha"]: "fail", trace_ids["lookup_bravo"]: "pass",
        trace_ids["lookup_charlie"]: "fail",
    }  # fmt: skip
    assert all(set(i["input"]) == {"question", "answer", "tool_calls"} for i in items)

    with OpenAIStandIn(answer=judge_answer) as judge:
        calibrated = pathgrade(
            data_dir, "judge", "calibrate", "--labels", str(labels), "--rubric",
            "task_completion@1", "--judge-url", judge.url, "--judge-model", "standin-judge",
            "--repeats", "1",
        )  # fmt: skip
    assert calibrated.returncode == 0, calibrated.stderr
    assert "agreement 0.667" in calibrated.stdout, calibrated.stdout
    assert "false-pass rate 0.500" in calibrated.stdout
    assert "judging: 3/3 judgements (100%)" in calibrated.stderr  # plain progress: not a TTY
    stored = process.sql(
        "SELECT Items, Agreement, FalsePassRate FROM judge_calibrations FINAL "
        "WHERE Model = 'standin-judge' AND RubricVersion = 'task_completion@1'"
    ).rows
    assert [(n, round(a, 3), fp) for n, a, fp in stored] == [(3, 0.667, 0.5)]
