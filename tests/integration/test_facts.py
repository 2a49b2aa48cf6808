"""Detection on what is never stored (issue 16), on one `pathgrade up --demo` with default
settings (nothing captured), the official OTLP exporters and the real broker and store:
for each convention the demo writes, every production failure alerts with its detector's
violation and clean turns raise nothing; the raw `pathgrade.spans` topic holds no
argument, result, message, e-mail or card; a second collector with capture on (same
broker, same fact key) alerts on the same failures, naming fields and kinds, never values;
and the seeded-defects walkthrough passes its gate rows on the default stack."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, set_span_in_context
from pathgrade.batch_plane.agents.span_export import exporter_for_url
from pathgrade.schemas.layers import LAYERS, OTHER
from pathgrade.schemas.topics import SPANS_TOPIC
from pathgrade.transport.message_auth import MESSAGE_KEY_FILE_ENV

from examples.seeded_defects.agent import BUILDS, CATCHING_METRICS
from pathgrade.demo.scenarios import CLEAN_SCENARIOS, TurnPlan, plan_turns
from pathgrade.demo.sender import send_demo_traces as send
from tests.integration.conftest import PathgradeProcess, start_collector, start_stack, wait_until
from tests.integration.test_harness import HARNESS_BUILDS
from tests.integration.test_realtime import Webhook
from tests.integration.test_up_alerts import fetch
from tests.support.topics import read_topic

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seeded_defects"
FAILURES = {
    "unrequested_billing_ticket": "PG110",  # an orphan write
    "plan_change_retry_storm": "PG108",  # retried without one idempotency key
    "cross_account_plan_change": "PG112",  # a write on another customer's account
    "refund_card_echoed": "PG115",  # a card number in the final answer
    "kb_injection_equipment_reset": "PG117",  # an irreversible write after injected text
    "refund_claimed_not_made": "PG116",  # a refund claimed that no tool made
    "order_lookup_loop": "PG107",  # a loop
}
GATED_BUILDS = sorted(set(BUILDS) - set(HARNESS_BUILDS))
"""The builds gated here; the harness builds are gated, case by case, in test_harness.py."""
TRACES = 20  # one deal of the demo's deck: each failure once
CARDS = ("4111 1111 1111 1111", "5555 5555 5555 4444", "4012 8888 8888 1881")


@dataclass
class Stack:
    process: PathgradeProcess
    data_dir: Path
    http_port: int
    grpc_port: int
    webhook: Webhook

    def alerts_of(self, trace_ids: list[str]) -> dict[str, list[dict]]:
        """The webhook's alerts of these traces, by trace id."""
        wanted = set(trace_ids)
        found: dict[str, list[dict]] = {t: [] for t in trace_ids}
        for alert in list(self.webhook.alerts):
            if alert["trace_id"] in wanted:
                found[alert["trace_id"]].append(alert)
        return found

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pathgrade.cli", *args, "--data-dir", str(self.data_dir)],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """`pathgrade up --demo` on default settings, alerts to a webhook."""
    data_dir = tmp_path_factory.mktemp("facts")
    webhook = Webhook()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    process, grpc_port, http_port = start_stack(
        data_dir, "--demo", "--no-demo-pages", "--alert-webhook", webhook.url, "--status-every", "2"
    )
    yield Stack(process, data_dir, http_port, grpc_port, webhook)
    try:
        assert process.terminate() == 0, process.output
    finally:
        webhook.shutdown()


def sent_turns(url: str, flavor: str, seed: int) -> list[tuple[TurnPlan, str]]:
    """Send one deal of demo turns through the official exporter for `url`; (plan, trace
    id) of each."""
    summary = send(exporter_for_url(url), traces=TRACES, seed=seed, flavor=flavor)
    return list(zip(plan_turns(TRACES, seed), summary.trace_ids, strict=True))


def failed_tool_trace(url: str) -> str:
    """Send one trace whose tool call failed (PG101); its trace id."""
    provider = TracerProvider(resource=Resource.create({"service.name": "sentinel"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter_for_url(url)))
    tracer = provider.get_tracer("sentinel")
    root = tracer.start_span("invoke_agent sentinel", attributes={"gen_ai.operation.name":
                             "invoke_agent", "pathgrade.turn.kind": "read"})  # fmt: skip
    tool = tracer.start_span(
        "execute_tool lookup_order", set_span_in_context(root),
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order"},
    )  # fmt: skip
    tool.set_status(Status(StatusCode.ERROR, "lookup failed"))
    tool.end()
    root.end()
    provider.shutdown()
    return f"{root.get_span_context().trace_id:032x}"


def assert_failures_alert_and_clean_turns_do_not(
    stack: Stack, turns: list[tuple[TurnPlan, str]], url: str
) -> dict[str, list[dict]]:
    """Each failure's violation arrives; then no clean turn has any alert at all. Prints
    how long after each failing turn ended its alert was raised."""
    ids = [trace_id for _, trace_id in turns]

    def fired() -> bool:
        alerts = stack.alerts_of(ids)
        return all(
            any(a["code"] == FAILURES[turn.scenario] and a["kind"] == "violation"
                for a in alerts[trace_id])
            for turn, trace_id in turns if turn.scenario in FAILURES
        )  # fmt: skip

    wait_until(fired, timeout_s=90)
    # One consumer evaluates traces in the order they went quiet: once a trace sent after
    # the deal has alerted, every turn of the deal was evaluated.
    sentinel = failed_tool_trace(url)
    wait_until(lambda: stack.alerts_of([sentinel])[sentinel], timeout_s=60)
    clean = [trace_id for turn, trace_id in turns if turn.scenario in CLEAN_SCENARIOS]
    assert clean, "the deal has clean turns"
    alerts = stack.alerts_of(ids)
    assert {t: alerts[t] for t in clean if alerts[t]} == {}
    delays = sorted(
        (a["detected_at_ns"] - a["trace_end_ns"]) / 1e9
        for turn, t in turns if turn.scenario in FAILURES
        for a in alerts[t] if a["code"] == FAILURES[turn.scenario]
    )  # fmt: skip
    print(f"alert delays after the turn ended: min {delays[0]:.2f} s, max {delays[-1]:.2f} s")
    return alerts


def secrets_of(turns: list[tuple[TurnPlan, str]]) -> set[str]:
    """Every raw value of the turns that must never reach Kafka on default settings:
    argument values and their JSON, results, user messages, answers, e-mails, cards."""
    values: set[str] = set(CARDS) | {card.replace(" ", "") for card in CARDS}
    for turn, _ in turns:
        values |= {turn.user_text, turn.answer, turn.customer_id}
        values |= set(re.findall(r"[\w.+-]+@[\w.-]+", turn.user_text))
        for call in turn.tool_calls:
            values |= {call.arguments_json, call.result_json}
            values |= {v for v in call.arguments.values() if isinstance(v, str) and len(v) > 3}
    return values


def raw_topic(data_dir: Path, trace_ids: list[str]) -> bytes:
    """Every message value on the stack's `pathgrade.spans`, concatenated; asserts that
    the read holds every trace of `trace_ids` (a read that got nothing would find no leak
    either)."""
    state = json.loads((data_dir / "stack.json").read_text())
    messages = read_topic(state["kafka"], SPANS_TOPIC)
    assert set(trace_ids) <= {m.key.decode() for m in messages}
    return b"".join(m.value for m in messages)


@pytest.mark.parametrize(
    ("flavor", "scheme", "seed"),
    [("genai", "http", 5), ("openinference", "grpc", 6), ("openllmetry", "http", 7)],
)
def test_default_settings_detect_every_failure_and_send_no_content(
    stack: Stack, flavor: str, scheme: str, seed: int
) -> None:
    port = stack.http_port if scheme == "http" else stack.grpc_port
    url = f"{scheme}://127.0.0.1:{port}"
    turns = sent_turns(url, flavor, seed)
    alerts = assert_failures_alert_and_clean_turns_do_not(stack, turns, url)
    secrets = secrets_of(turns)
    for trace_alerts in alerts.values():
        for alert in trace_alerts:  # findings name fields and kinds, never values
            text = alert["reason"] + json.dumps(alert["details"])
            assert not [s for s in secrets if s in text], alert
    topic = raw_topic(stack.data_dir, [trace_id for _, trace_id in turns])
    leaked = sorted(s for s in secrets if s.encode() in topic)
    assert leaked == [], leaked[:5]
    assert b"@example.com" not in topic
    key = (stack.data_dir / "facts.key").read_text().strip()  # the fact key stays home
    assert key.encode() not in topic and bytes.fromhex(key) not in topic
    stored = f"SELECT count() FROM spans WHERE position(toString(SpanAttributes), '{key}') > 0"
    assert stack.process.scalar(stored) == 0


def test_capture_on_still_alerts_and_names_fields_and_kinds(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector keeping every tool's content and the messages (the same deployment:
    its broker, fact key and message key) feeds the same realtime plane."""
    state = json.loads((stack.data_dir / "stack.json").read_text())
    monkeypatch.setenv(MESSAGE_KEY_FILE_ENV, state["message_key_file"])
    collector, _, http_port = start_collector(
        state["kafka"], stack.data_dir / "capture-spill", "--capture-tools", "*",
        "--capture-messages", "--facts-key-file", str(stack.data_dir / "facts.key"),
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{http_port}"
        turns = sent_turns(url, "genai", 8)
        alerts = assert_failures_alert_and_clean_turns_do_not(stack, turns, url)
    finally:
        assert collector.terminate() == 0, collector.output
    card = next(
        a for (turn, t) in turns if turn.scenario == "refund_card_echoed"
        for a in alerts[t] if a["code"] == "PG115"
    )  # fmt: skip
    assert (card["details"]["field"], card["details"]["kind"]) == ("final answer", "card")
    secrets = secrets_of(turns)
    for trace_alerts in alerts.values():
        for alert in trace_alerts:
            text = alert["reason"] + json.dumps(alert["details"])
            assert not [s for s in secrets if s in text], alert


def test_coverage_gaps_are_figures_and_one_alert_per_window(stack: Stack) -> None:
    """The demo services (the `--demo` traffic and the deals above) leave no detector
    undecided. The sentinel traces (no model call: no final answer to judge) are a gap of
    their service: a coverage figure in `pathgrade status`, the metrics and the browser
    view, saying how to close it, and one alert per detector for the window, not one per
    trace."""
    wait_until(lambda: any(line.startswith("status: in ") for line in stack.process.lines), 60)
    status = stack.cli("status", "--format", "json", timeout=60)
    assert status.returncode == 0, status.stderr
    snapshot = json.loads(status.stdout)["snapshot"]
    workers = [w for w in snapshot["realtime"] if w is not None]
    gaps = [g for w in workers for g in w["coverage"]["gaps"]]
    assert [g for g in gaps if g["service"].startswith("support-agent")] == []
    assert all(w["detector_errors"] == {} for w in workers)
    demo_undecided = [
        a for a in stack.webhook.alerts
        if a["kind"] == "cannot_decide" and a["service"].startswith("support-agent")
    ]  # fmt: skip
    assert demo_undecided == []
    sentinel = {g["code"]: g for g in gaps if g["service"] == "sentinel"}
    assert sentinel["PG113"]["undecided"] >= 2 and "capture messages" in sentinel["PG113"]["close"]
    gap_alerts = [a for a in stack.webhook.alerts if a["details"].get("coverage_gap")]
    assert sorted(a["code"] for a in gap_alerts) == sorted(sentinel)  # one per detector
    assert all(a["severity"] == "low" for a in gap_alerts)
    text = stack.cli("status", timeout=60).stdout
    assert "coverage gaps" in text and "PG113 no-clean-termination on sentinel" in text
    state = json.loads((stack.data_dir / "stack.json").read_text())
    wait_until(lambda: "Coverage gaps" in fetch(state["ui_url"] + "/health"), timeout_s=30)
    metrics = stack.process.owner().get("/metrics").decode()
    assert 'pathgrade_realtime_coverage_ratio{code="PG113",service="sentinel"' in metrics


@pytest.mark.timeout(900)  # fifteen CLI runs, five of them evaluations: slow on a loaded machine
def test_seeded_defects_pass_their_gate_rows_on_the_default_stack(
    stack: Stack, tmp_path: Path
) -> None:
    """docs/datasets.md's walkthrough: healthy passes; each seeded defect fails the row of
    the metric that catches it (argument_correctness compares fingerprints: no argument is
    stored); verdicts are recorded and listed; score files without budgets fail closed."""
    suite = str(EXAMPLE / "suite.yaml")
    imported = stack.cli("dataset", "import", "golden/support-seeded",
                         str(EXAMPLE / "golden.jsonl"), "--publish")  # fmt: skip
    assert imported.returncode == 0, imported.stderr

    def evaluate(build: str) -> str:
        run_id = f"run-{build}-{tmp_path.name[-6:]}"
        done = stack.cli("eval", suite, "--agent", f"{EXAMPLE / 'agent.py'}:{build}",
                         "--run-id", run_id)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"run {run_id} finished: 18 attempts, 18 traces" in done.stdout
        return run_id

    baseline = evaluate("healthy")
    stored = stack.process.scalar(
        f"SELECT countIf(GenAIToolArguments != '') FROM spans WHERE EvalRunId = '{baseline}'"
    )
    assert stored == 0  # nothing captured: the scores come from the facts
    recorded = {}
    for build in GATED_BUILDS:
        report = tmp_path / f"{build}.json"
        gated = stack.cli("gate", suite, "--candidate", evaluate(build), "--baseline", baseline,
                          "--output", str(report), "--output", str(tmp_path / "j.xml"))  # fmt: skip
        verdict = json.loads(report.read_text())
        failed = {r["metric"] for r in verdict["rows"] if not r["passed"] and r["slice"] is None}
        assert failed == CATCHING_METRICS[build], gated.stdout
        assert gated.returncode == (0 if build == "healthy" else 1), gated.stderr
        assert "<testsuite" in (tmp_path / "j.xml").read_text()
        recorded[build] = re.search(r"recorded as (gate-[0-9a-f]{12})", gated.stderr)[1]
        shown = stack.cli("gates", "show", recorded[build], "--format", "json")
        assert json.loads(shown.stdout) == verdict, shown.stderr

    listed = stack.cli("gates", "list", "--suite", "support-agent-seeded", "--format", "json")
    by_id = {row["GateId"]: row for row in map(json.loads, listed.stdout.splitlines())}
    assert len(by_id) == len(GATED_BUILDS), listed.stderr
    for build, gate_id in recorded.items():
        assert by_id[gate_id]["Verdict"] == ("PASS" if build == "healthy" else "FAIL")
        assert by_id[gate_id]["BaselineRun"] == baseline
    unrecorded = stack.cli("gate", suite, "--candidate", baseline, "--baseline", baseline,
                           "--no-record")  # fmt: skip
    assert unrecorded.returncode == 0 and "recorded as" not in unrecorded.stderr

    candidate = tmp_path / "c.jsonl"
    exported = stack.cli("scores", "export", "--run", baseline, "--out", str(candidate))
    assert exported.returncode == 0, exported.stderr
    layers = [json.loads(line)["layer"] for line in candidate.read_text().splitlines()]
    assert list(dict.fromkeys(layers)) == [*(layer for layer in LAYERS if layer in layers), OTHER]
    assert {"hand-off", "plan", "safety"} <= set(layers) and "hand-off " in exported.stdout
    offline = stack.cli("gate", suite, "--candidate-scores", str(candidate),
                        "--baseline-scores", str(candidate), "--format", "markdown")  # fmt: skip
    assert offline.returncode == 1  # no budget observations in score files: fail closed
    assert "no observations for p95_latency_s" in offline.stdout
    missing = stack.cli("gate", suite, "--candidate", "run-nope", "--baseline", baseline)
    assert missing.returncode == 2 and "run 'run-nope': not in the store" in missing.stderr
