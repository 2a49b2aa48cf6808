"""Monitors on the real stack (issue 45): a real Tansu broker, a `pathgrade collector`, the
store writer, the realtime plane and the online scorer over a real chDB store, traffic sent
with the official OTel SDK exporter at chosen times, the scripted OpenAI stand-in as the
judge, and the monitors' clock set by the test (an hour of traffic, and last week's, is laid
out in seconds; each tick is evaluated at the time the test says).

- a tool-error rate ramping from 1% to 10% fires the burn-rate objective within its fast
  window, once (the short window dips to the threshold while the ramp holds: one episode
  all the same, `resolve_after_s`), and resolves once after the ramp;
- steady traffic with the same 1% noise fires nothing over 14 minutes of evaluations every
  5 s (a single-window rule would: its short window alone crosses 5% at some ticks);
- a detector's rate that doubles from its week-ago baseline fires, one that reads 1.33 times
  its baseline over fewer turns does not;
- the stand-in judge's faithfulness scores dropping by 0.1 on one intent fire the score
  monitor for that intent only, once (its interval's edge wavers about the threshold as
  the window fills: one episode all the same);
- a restart of the realtime plane in the middle of the ramp's episode (a new plane, its
  state only what the store holds; the webhook down from before the firing until the
  restart) neither loses the firing (the new plane delivers it from the alerts table) nor
  fires the episode again.
Every monitor alert reaches every sink: the alerts table, the webhook, the alerts topic
and the log line.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.judge_endpoint import JudgeEndpoint
from pathgrade.batch_plane.scoring.online import OnlineScorer
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.deliveries import AlertRecords
from pathgrade.batch_plane.store.monitors import MonitorQueries
from pathgrade.batch_plane.store.writer import StoreWriter
from pathgrade.batch_plane.store.writer_config import StoreWriterConfig
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.config import RealtimeConfig, SamplerRates
from pathgrade.realtime_plane.delivery import MONITOR_STREAM, AlertBacklog
from pathgrade.realtime_plane.plane import RealtimePlane
from pathgrade.schemas.alerts import ALERT_COLUMNS
from pathgrade.schemas.topics import ALERT_LOGGER, ALERTS_TOPIC

from pathgrade.stack.broker import LocalBroker, ensure_topics
from tests.integration.conftest import start_collector, wait_until
from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.monitor_traffic import ScoreJudge, Turn, every, send_turns, with_errors
from tests.support.openai_standin import OpenAIStandIn
from tests.support.topics import read_topic_to_end

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # the module fixture: 180 ticks

WEEK = 7 * 86_400
BUCKET = 5
POLICY = """
version: 1
services:
  score-svc: {risk_tier: high, scorers: [faithfulness]}
  rate-up-svc: {budgets: {max_tool_calls: 1}}
  rate-noise-svc: {budgets: {max_tool_calls: 1}}
monitors:
  every_s: 3600
  bucket_s: 5
  settle_s: 0
  resolve_after_s: 60
  resamples: 2000
  slices: [app.intent]
  objectives:
    - name: tool-errors
      good: no_tool_error
      objective: 0.99
      slice: service
      min_turns: 30
      windows: [{long_s: 60, short_s: 15, burn_rate: 5, severity: high}]
  detector_rates:
    - {name: budget-rate, detector: PG114, window_s: 600, slice: service, min_turns: 200}
  scores:
    - name: faithfulness
      service: score-svc
      metric: faithfulness
      window_s: 600
      max_drop: 0.02
      min_samples: 30
      slice: app.intent
"""


def start_of_minute(seconds: float) -> int:
    return int(seconds) - int(seconds) % 60


T0 = start_of_minute(time.time() - 3 * 3600)  # the evaluated quarter hour starts here
T1 = T0 + 900  # ... and ends here: the last tick, the end of the baselines' current windows
RAMP = (T0 + 300, T0 + 330, T0 + 420)  # 1% -> 10% over 30 s, held until 420 s
WEBHOOK_DOWN = T0 + 320  # the webhook refuses alerts from this tick ...
RESTART = T0 + 380  # ... until the realtime plane restarts before this one


def ramp_rate(end_s: float) -> float:
    start, top, stop = RAMP
    if start <= end_s < top:
        return 0.01 + 0.09 * (end_s - start) / (top - start)
    return 0.10 if top <= end_s < stop else 0.01


def budget_turns(service: str, start: float, per_s: float, every_nth: int) -> list[Turn]:
    """Turns of `service` over 600 s from `start`, every `every_nth` with two tool calls
    (over the policy's budget of one: a PG114 finding)."""
    plain = list(every(service, start, start + 600, per_s))
    return [
        Turn(t.service, t.end_s, tool_calls=2 if i % every_nth == 0 else 1)
        for i, t in enumerate(plain)
    ]


def scored_turns(start: float, intent: str, good_share: int) -> list[Turn]:
    """80 turns of score-svc over 600 s from `start`: the judge gives `good_share` in 10 of
    them a 4 (1.0) and the others a 3 (0.667)."""
    plain = every("score-svc", start, start + 600, 80 / 600)
    return [
        Turn(t.service, t.end_s, intent=intent, verdict=4 if i % 10 < good_share else 3)
        for i, t in enumerate(plain)
    ]


def traffic() -> list[Turn]:
    steady = with_errors(every("steady-svc", T0, T1, 4), lambda _: 0.01, seed=1)
    ramp = with_errors(every("ramp-svc", T0, T1, 4), ramp_rate, seed=2)
    rates = [
        *budget_turns("rate-up-svc", T1 - 600 - WEEK, 2, 40),  # 2.5% of 1,200 a week earlier
        *budget_turns("rate-up-svc", T1 - 600, 2, 20),  # 5%: doubled
        *budget_turns("rate-noise-svc", T1 - 600 - WEEK, 1, 40),  # 2.5% of 600
        *budget_turns("rate-noise-svc", T1 - 600, 1, 30),  # 3.33% of 600: within noise
    ]
    scores = [
        *scored_turns(T1 - 600 - WEEK, "refund", 7), *scored_turns(T1 - 600 - WEEK, "status", 7),
        *scored_turns(T1 - 600, "refund", 4),  # 0.9 -> 0.8 on refunds
        *scored_turns(T1 - 600, "status", 7),  # unchanged
    ]  # fmt: skip
    return [*steady, *ramp, *rates, *scores]


class Webhook(ThreadingHTTPServer):
    """Collects the alerts POSTed to it; answers 503 (try again) while `down`."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.alerts: list[dict] = []
        self.down = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/alerts"

    def monitors(self, name: str) -> list[dict]:
        return [a for a in self.alerts if a["kind"] == "monitor" and a["name"] == name]


class _Handler(BaseHTTPRequestHandler):
    server: Webhook

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.down:
            self.send_response(503)
        else:
            self.server.alerts.append(body)
            self.send_response(204)
        self.end_headers()


class AlertLines(logging.Handler):
    """The alert log lines' alerts."""

    def __init__(self) -> None:
        super().__init__()
        self.alerts: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.alerts.append(record.alert.model_dump(mode="json"))  # type: ignore[attr-defined]


class Clock:
    def __init__(self) -> None:
        self.now = float(T0)

    def __call__(self) -> float:
        return self.now


class Stack:
    """What the tests drive: the realtime plane (and its monitors' clock) and the webhook."""

    def __init__(self, config: RealtimeConfig, store: ClientStore, webhook: Webhook) -> None:
        self.config, self.store, self.webhook = config, store, webhook
        self.lines = AlertLines()
        self.clock = Clock()
        self.undelivered: str | None = None  # the first tick whose alerts missed the webhook
        # the webhook's cursors
        self.backlog = AlertBacklog(AlertRecords(store), config.webhook_url or "")
        self.plane = self.new_plane()

    def new_plane(self) -> RealtimePlane:
        return RealtimePlane(
            self.config, AlertRecords(self.store), monitor_reads=MonitorQueries(self.store),
            monitor_clock=self.clock,
        )  # fmt: skip

    def tick(self, now: float) -> None:
        assert self.plane.monitors is not None
        self.clock.now = now
        self.plane.monitors.tick_now()

    def stored_alerts(self) -> dict[str, tuple[int, int]]:
        """The monitor alerts every plane stored so far: alert key -> (stream, number)."""
        rows = self.store.query(
            "SELECT AlertKey, SpansPartition, PartitionSeq FROM alerts FINAL WHERE Kind = 'monitor'"
        ).rows
        return {key: (stream, number) for key, stream, number in rows}

    def missing_from_webhook(self) -> str:
        """The stored monitor alerts the webhook has not got ("" when none), with their
        numbers and the delivery state: the plane's webhook cursors, the saved ones, its
        counters."""
        got = delivered(self)
        missing = {k: n for k, n in self.stored_alerts().items() if k not in got}
        if not missing:
            return ""
        counters = self.plane.counters()
        assert self.plane.webhook is not None
        return (
            f"the webhook did not get {missing} (key: (stream, number)); its cursors "
            f"{self.plane.webhook.cursors()}, saved {self.backlog.cursors()}, counters "
            f"{ {k: v for k, v in counters.items() if k.startswith(('webhook_', 'monitor_'))} }"
        )

    def restart(self) -> None:
        """Stop the plane without delivering what it still holds (its webhook closed with
        the alerts it could not deliver), and start a new one: whatever it knows of the
        monitors it reads from the store."""
        old = self.plane
        old.suspend()
        assert old.webhook is not None
        old.webhook.close()
        self.plane = self.new_plane()
        self.plane.start()
        assert self.plane.monitors is not None and self.plane.monitors.ready.wait(120)


@pytest.fixture(scope="module")
def stack(store: ClientStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The whole stack with the traffic sent, evaluated, scored and counted."""
    root = tmp_path_factory.mktemp("monitors")
    broker = LocalBroker(log_path=root / "broker.log")
    broker.start()
    ensure_topics(broker.bootstrap)
    collector, _, http_port = start_collector(
        broker.bootstrap, root / "spill", "--capture-tools", "*", "--capture-messages",
        "--allow-keys", "app.intent",
    )  # fmt: skip
    policy_path = root / "policy.yaml"
    policy_path.write_text(POLICY)
    webhook = Webhook()
    threading.Thread(target=webhook.serve_forever, daemon=True).start()
    config = RealtimeConfig(
        bootstrap_servers=broker.bootstrap, policy_path=str(policy_path),
        webhook_url=webhook.url, turns_topic=None,
        sampler=SamplerRates(tiers={"low": 0, "medium": 0, "high": 1.0}, finding=0,
                             tool_error=0, long_trajectory=0, negative_feedback=0),
    )  # fmt: skip
    stack = Stack(config, store, webhook)
    alert_log = logging.getLogger(ALERT_LOGGER)
    level = alert_log.level
    alert_log.setLevel(logging.INFO)
    alert_log.addHandler(stack.lines)
    stop = threading.Event()
    writer = StoreWriter(StoreWriterConfig(bootstrap_servers=broker.bootstrap), store)
    judge_answers = ScoreJudge()
    with OpenAIStandIn(answer=judge_answers) as standin:
        judge = Judge(JudgeEndpoint(standin.url, "gpt-4o-mini"), store=store)
        scorer = OnlineScorer(
            OnlineScorerConfig(bootstrap_servers=broker.bootstrap,
                               policy=load_policy(policy_path), trace_wait_s=30),
            store, judge,
        )  # fmt: skip
        threads = [threading.Thread(target=writer.run, args=(stop,), daemon=True),
                   threading.Thread(target=scorer.run, args=(stop,), daemon=True)]  # fmt: skip
        for thread in threads:
            thread.start()
        stack.plane.start()
        try:
            turns = traffic()
            sent = send_turns(f"http://127.0.0.1:{http_port}/v1/traces", turns)
            wait_until(lambda: stack.plane.counters()["traces_evaluated"] >= sent, timeout_s=240)
            judged = sum(t.verdict is not None for t in turns)
            wait_until(lambda: scorer.stats.scored >= judged, timeout_s=240)
            wait_until(lambda: counted(store, "turns") >= sent, timeout_s=60)
            wait_until(lambda: counted(store, "scores") >= judged, timeout_s=60)
            assert stack.plane.monitors is not None and stack.plane.monitors.ready.wait(60)
            yield stack
        finally:
            stack.plane.stop()
            stop.set()
            for thread in threads:
                thread.join(30)
            writer.close()
            scorer.close()
            judge.close()
            webhook.shutdown()
            alert_log.removeHandler(stack.lines)
            alert_log.setLevel(level)
            assert collector.terminate() == 0, collector.output
            broker.stop()


def counted(store: ClientStore, source: str) -> int:
    """The turns (or scores) the rollups hold over all turns."""
    name = "turns" if source == "turns" else "faithfulness"
    return int(store.query(
        "SELECT sum(Count) FROM monitor_rollups WHERE Source = {source:String} "
        "AND Name = {name:String} AND Slice = ''", {"source": source, "name": name},
    ).rows[0][0] or 0)  # fmt: skip


@pytest.fixture(scope="module")
def evaluated(stack: Stack) -> dict[str, list[tuple[int, dict]]]:
    """Every tick from a minute in to the end of the quarter hour, every 5 s, the webhook
    down from WEBHOOK_DOWN and the plane restarted at RESTART: per monitor, the (tick it was
    evaluated at, alert) of each alert the planes emitted (their log lines) or the webhook got,
    once per alert key (delivery is at least once), in the order they were found. A tick
    whose stored alerts do not all reach the webhook within 240 s is kept in `undelivered`
    with what it did not get and why (the sinks test fails on it), and the ticks after it go
    on without waiting."""
    for now in range(T0 + 60, T1 + 1, BUCKET):
        if now == WEBHOOK_DOWN:
            stack.webhook.down = True
        if now == RESTART:
            stack.restart()
            stack.webhook.down = False
        stack.tick(now)
        if not stack.webhook.down and stack.undelivered is None:
            # a webhook retry backs off: on a loaded machine delivery can take a while
            try:
                wait_until(lambda: not stack.missing_from_webhook(), 240)
            except AssertionError:  # test_every_monitor_alert_reaches_every_sink fails
                stack.undelivered = (
                    f"after the tick at T0+{now - T0} s, {stack.missing_from_webhook()}"
                )
    emitted = {a["alert_key"]: a for a in stack.lines.alerts if a["kind"] == "monitor"}
    every = {**emitted, **delivered(stack)}
    found: dict[str, list[tuple[int, dict]]] = {}
    for alert in sorted(every.values(), key=lambda a: a["detected_at_ns"]):
        found.setdefault(alert["name"], []).append((alert["detected_at_ns"] // 10**9, alert))
    return found


def delivered(stack: Stack) -> dict[str, dict]:
    """The monitor alerts the webhook got, by alert key."""
    return {a["alert_key"]: a for a in stack.webhook.alerts if a["kind"] == "monitor"}


def scope_of(alert: dict) -> str:
    return alert["details"]["scope"]


def test_a_ramping_tool_error_rate_fires_within_the_fast_window_and_resolves_after_it(
    evaluated: dict[str, list[tuple[int, dict]]], store: ClientStore
) -> None:
    ramp = [(at, a) for at, a in evaluated["tool-errors"] if scope_of(a) == "service=ramp-svc"]
    assert [a["details"]["state"] for _, a in ramp] == ["firing", "resolved"]
    (fired_at, firing), (resolved_at, resolved) = ramp
    start, _, stop = RAMP
    assert start < fired_at <= start + 60  # within the fast pair's long window of the ramp
    # the short window cleared (15 s), and stayed clear for resolve_after_s (60 s)
    assert stop < resolved_at <= stop + 15 + 60 + 2 * BUCKET
    assert firing["details"]["episode"] == resolved["details"]["episode"]
    assert (firing["code"], firing["service"], firing["severity"]) == ("PG200", "ramp-svc", "high")
    example = firing["details"]["examples"][0]
    assert firing["trace_id"] == example["trace_id"]
    bad = store.query(
        "SELECT count() FROM spans FINAL WHERE TraceId = {t:String} AND StatusCode = 'Error'",
        {"t": example["trace_id"]},
    ).rows[0][0]
    assert bad == 1  # the example is a turn with the failed tool call
    stored = store.query(
        f"SELECT {', '.join(ALERT_COLUMNS)} FROM alerts FINAL WHERE Kind = 'monitor' "
        "AND Name = 'tool-errors' ORDER BY DetectedAtNs"
    ).dicts()
    assert [(r["AlertKey"], r["Reason"]) for r in stored] == [
        (firing["alert_key"], firing["reason"]),
        (resolved["alert_key"], resolved["reason"]),
    ]


def test_steady_traffic_with_the_same_noise_fires_nothing_over_the_long_run(
    evaluated: dict[str, list[tuple[int, dict]]], store: ClientStore
) -> None:
    fired = [a for _, a in evaluated.get("tool-errors", []) if scope_of(a) != "service=ramp-svc"]
    assert fired == []
    ticks = [
        t
        for t in MonitorQueries(store).ticks(T0 * 10**9, (T1 + 1) * 10**9, "tool-errors")
        if t.scope == "service=steady-svc"
    ]
    assert len(ticks) == len(range(T0 + 60, T1 + 1, BUCKET))
    assert {t.state for t in ticks} == {"ok"}
    short_burns = [t.details["pairs"][0]["short"]["burn"] for t in ticks]
    assert max(short_burns) > 5  # the noise alone crosses the threshold in the short window
    assert max(t.figure for t in ticks) <= 5  # ... never in both


def test_a_doubled_detector_rate_fires_and_one_within_noise_does_not(
    evaluated: dict[str, list[tuple[int, dict]]], store: ClientStore
) -> None:
    alerts = [a for _, a in evaluated.get("budget-rate", [])]
    assert [(scope_of(a), a["details"]["state"]) for a in alerts] == [
        ("service=rate-up-svc", "firing")
    ]
    (firing,) = alerts
    assert firing["code"] == "PG201" and "had PG114 findings" in firing["reason"]
    assert firing["details"]["interval"][0] > 0
    latest = {t.scope: t for t in MonitorQueries(store).latest_ticks(T1 * 10**9, "budget-rate")}
    noise = latest["service=rate-noise-svc"]
    assert (noise.items, noise.baseline_items) == (600, 600)
    assert noise.current / noise.baseline == pytest.approx(4 / 3, rel=0.01)  # a raw ratio of 1.33
    assert noise.low < 0 < noise.high and noise.state == "ok"  # ... within noise


def test_a_score_drop_on_one_slice_fires_for_that_slice_only(
    evaluated: dict[str, list[tuple[int, dict]]], store: ClientStore
) -> None:
    alerts = [a for _, a in evaluated.get("faithfulness", [])]
    assert [(scope_of(a), a["details"]["state"]) for a in alerts] == [
        ("app.intent=refund", "firing")
    ]
    (firing,) = alerts
    assert firing["code"] == "PG202" and firing["service"] == "score-svc"
    latest = {t.scope: t for t in MonitorQueries(store).latest_ticks(T1 * 10**9, "faithfulness")}
    refund, status = latest["app.intent=refund"], latest["app.intent=status"]
    assert (refund.items, refund.baseline_items) == (80, 80)
    assert refund.figure == pytest.approx(-0.1, abs=0.001)  # 0.9 -> 0.8
    assert refund.high < -0.02 and refund.state == "firing"
    assert status.figure == pytest.approx(0.0, abs=1e-9) and status.state == "ok"
    worst = firing["details"]["examples"][0]["trace_id"]
    value = store.query(
        "SELECT min(Value) FROM scores FINAL WHERE TraceId = {t:String} "
        "AND Metric = 'faithfulness'",
        {"t": worst},
    ).rows[0][0]
    assert value == pytest.approx(2 / 3)  # an example of the lower scores


def test_a_restart_neither_loses_the_firing_nor_fires_the_episode_again(
    evaluated: dict[str, list[tuple[int, dict]]], store: ClientStore
) -> None:
    ramp = [a for _, a in evaluated["tool-errors"] if scope_of(a) == "service=ramp-svc"]
    firing, resolved = ramp  # one episode: one firing, one resolution (checked above too)
    fired_at = firing["detected_at_ns"] // 10**9
    # found by the first plane while the webhook refused it, delivered by the new one
    assert WEBHOOK_DOWN <= fired_at < RESTART
    assert resolved["detected_at_ns"] // 10**9 > RESTART
    assert firing["details"]["episode"] == resolved["details"]["episode"]
    rows = store.query(
        "SELECT Details, SpansPartition, PartitionSeq FROM alerts FINAL WHERE Kind = 'monitor' "
        "AND Name = 'tool-errors' ORDER BY DetectedAtNs"
    ).rows
    states = [json.loads(details)["state"] for details, _, _ in rows]
    assert states == ["firing", "resolved"]  # the new plane stored no second firing
    numbers = [(stream, number) for _, stream, number in rows]
    assert len(set(numbers)) == 2 and {stream for stream, _ in numbers} == {MONITOR_STREAM}


def test_every_monitor_alert_reaches_every_sink(
    evaluated: dict[str, list[tuple[int, dict]]], stack: Stack, store: ClientStore
) -> None:
    stored = {
        key
        for (key,) in store.query("SELECT AlertKey FROM alerts FINAL WHERE Kind = 'monitor'").rows
    }
    assert len(stored) == 4  # the ramp's firing and resolution, a rate's and a score's firings
    assert {a["alert_key"] for found in evaluated.values() for _, a in found} == stored
    published = [json.loads(m.value) for m in read_topic_to_end(stack.config.bootstrap_servers,
                                                                 ALERTS_TOPIC)]  # fmt: skip
    assert {a["alert_key"] for a in published if a["kind"] == "monitor"} == stored
    assert {a["alert_key"] for a in stack.lines.alerts if a["kind"] == "monitor"} == stored
    assert stack.undelivered is None, stack.undelivered
    assert set(delivered(stack)) == stored  # the webhook
