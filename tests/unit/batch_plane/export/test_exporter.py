"""The results exporter against a real embedded store and a real OTLP/HTTP logs receiver:
each stored score and alert arrives, parented to its span, scrubbed; a receiver that is
down or failing delays and loses nothing; refusals, batches, restarts and late commits."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from pathgrade.batch_plane.export.config import ExportConfig
from pathgrade.batch_plane.export.exporter import ResultExporter
from pathgrade.batch_plane.scoring.scores import SCORE_COLUMNS, Score, score_row, write_scores
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.schemas.alerts import ALERT_COLUMNS, Alert
from pydantic import ValidationError

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)
from tests.support.otlp_logs import LogsReceiver

SCORE_ID, ALERT_KEY = "pathgrade.score.id", "pathgrade.alert.key"


def exporter_for(store: ClientStore, receiver: LogsReceiver, **settings: Any) -> ResultExporter:
    """An exporter of its own (a receiver's URL is new: its cursors start now), quick to
    retry, reading rows as soon as they are stored."""
    defaults = {"settle_s": 0, "poll_s": 0.05, "backoff_s": 0.05, "max_backoff_s": 0.2,
                "timeout_s": 2, "recheck_window_s": 0}  # fmt: skip
    exporter = ResultExporter(ExportConfig(url=receiver.url, **{**defaults, **settings}), store)
    exporter.resume()
    return exporter


def scores(count: int, tenant: str = "t1", explanation: str = "") -> list[Score]:
    metric = "task_completion"
    made = [
        Score(
            metric, f"judge:{metric}", f"{metric}@1", tenant, uuid.uuid4().hex, value=i / count,
            label="pass", explanation=explanation, span_id=uuid.uuid4().hex[:16],
        )
        for i in range(count)
    ]  # fmt: skip
    return made


def alert(reason: str = "tool ran after a refusal") -> Alert:
    now = time.time_ns()
    return Alert(
        alert_key=uuid.uuid4().hex, code="PG111", name="irreversible_without_approval",
        severity="critical", kind="violation", reason=reason, trace_id=uuid.uuid4().hex,
        span_id=uuid.uuid4().hex[:16], tenant="t1", service="shop", agent="support",
        conversation_id="c1", risk_tier="high", policy="default", trace_start_ns=now,
        trace_end_ns=now, detected_at_ns=now,
    )  # fmt: skip


def store_alerts(store: ClientStore, alerts: list[Alert]) -> None:
    store.insert("alerts", [a.row() for a in alerts], list(ALERT_COLUMNS))


def drain(exporter: ResultExporter) -> None:
    while exporter.export_once():
        pass


def wait_until(check: Any, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_every_score_and_alert_arrives_once_parented_to_its_span(store: ClientStore) -> None:
    receiver = LogsReceiver(required_headers={"authorization": "Bearer s3cret"})
    before = scores(2)
    write_scores(store, before)  # stored before the exporter was first set: not exported
    exporter = exporter_for(store, receiver, headers={"authorization": "Bearer s3cret"})
    sent = scores(3, explanation="refund to jane@example.com on 4111 1111 1111 1111")
    write_scores(store, sent)
    alerts = [alert("mailed ops@example.com"), alert()]
    store_alerts(store, alerts)
    drain(exporter)
    exporter.stop()

    received = {r.attributes.get(SCORE_ID) or r.attributes[ALERT_KEY]: r for r in receiver.records}
    assert len(receiver.records) == len(received) == 5
    for score in sent:
        record = received[score.score_id]
        assert record.event_name == "gen_ai.evaluation.result"
        assert (record.trace_id, record.span_id) == (score.trace_id, score.span_id)
        assert record.attributes["gen_ai.evaluation.name"] == "task_completion"
        assert record.attributes["gen_ai.evaluation.score.value"] == score.value
        explanation = record.attributes["gen_ai.evaluation.explanation"]
        assert "jane@" not in explanation and "4111" not in explanation
        assert "[REDACTED:email]" in explanation and "[REDACTED:card]" in explanation
        assert record.resource == {"service.name": "pathgrade", "pathgrade.tenant": "t1"}
        assert record.schema_url == "https://opentelemetry.io/schemas/1.38.0"
    for sent_alert in alerts:
        record = received[sent_alert.alert_key]
        assert record.event_name == "pathgrade.alert"
        assert (record.trace_id, record.span_id) == (sent_alert.trace_id, sent_alert.span_id)
        assert record.severity_text == "critical" and record.severity_number == 21
        assert "ops@example.com" not in record.body
    assert not {s.score_id for s in before} & received.keys()
    assert exporter.stats.exported_scores == 3 and exporter.stats.exported_alerts == 2


def test_a_receiver_that_is_down_or_failing_delays_and_loses_nothing(store: ClientStore) -> None:
    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver)
    exporter.start()
    first = scores(2)
    write_scores(store, first)
    wait_until(lambda: len(receiver.records) == 2)
    receiver.down()
    during = scores(3)
    write_scores(store, during)
    store_alerts(store, [alert()])
    wait_until(lambda: exporter.stats.failing == 1 and exporter.stats.retries >= 3)
    receiver.up()  # back on its port, but answering 503 for a while
    receiver.answer_status = 503
    wait_until(lambda: receiver.requests >= 2)
    assert len(receiver.records) == 2
    receiver.answer_status = None
    wait_until(lambda: len(receiver.records) == 6)
    assert exporter.stats.failing == 0
    exporter.stop()
    ids = receiver.ids(SCORE_ID)
    assert sorted(ids) == sorted(s.score_id for s in first + during)
    assert exporter.stats.refused == 0


def test_a_refused_record_is_given_up_alone_and_a_refusing_endpoint_loses_nothing(
    store: ClientStore,
) -> None:
    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver)
    batch = scores(5)
    receiver.refuse_ids = {batch[2].score_id}
    write_scores(store, batch)
    drain(exporter)
    kept = [s.score_id for i, s in enumerate(batch) if i != 2]
    assert sorted(receiver.ids(SCORE_ID)) == sorted(kept)
    assert exporter.stats.refused == 1

    everything_refused = scores(2)
    receiver.answer_status = 400  # even an empty request: the endpoint is what is wrong
    exporter.start()
    write_scores(store, everything_refused)
    wait_until(lambda: exporter.stats.retries >= 3)
    assert exporter.stats.refused == 1 and exporter.stats.failing == 1
    receiver.answer_status = None
    wait_until(lambda: len(receiver.records) == 6)
    exporter.stop()


def test_requests_are_bounded_in_records_and_bytes(store: ClientStore) -> None:
    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver, batch_records=4)
    write_scores(store, scores(10))
    drain(exporter)
    assert len(receiver.records) == 10 and max(receiver.batches) <= 4

    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver, batch_bytes=64 << 10, text_chars=20_000)
    long = scores(8, explanation="x" * 30_000)
    write_scores(store, long)
    drain(exporter)
    assert len(receiver.records) == 8
    assert max(receiver.bodies) <= 64 << 10 and len(receiver.bodies) >= 3
    explanations = {r.attributes["gen_ai.evaluation.explanation"] for r in receiver.records}
    assert explanations == {"x" * 20_000}  # cut at text_chars


class ThreadGatedStore:
    """`store`, but a call from any thread other than the one that made it waits for
    `opened`: the exporter's own thread is held back as a loaded machine would."""

    def __init__(self, store: ClientStore) -> None:
        self._store = store
        self._owner = threading.get_ident()
        self.opened = threading.Event()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)

        def gated(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != self._owner:
                self.opened.wait()
            return method(*args, **kwargs)

        return gated


def test_every_row_stored_after_start_returns_is_exported_however_late_its_thread_runs(
    store: ClientStore,
) -> None:
    receiver = LogsReceiver()
    gated = ThreadGatedStore(store)
    config = ExportConfig(url=receiver.url, settle_s=0, poll_s=0.05, recheck_window_s=0)
    exporter = ResultExporter(config, gated)  # type: ignore[arg-type]
    exporter.start()
    early = scores(2)
    write_scores(store, early)  # before the exporter's thread read anything
    store_alerts(store, [alert()])
    gated.opened.set()
    wait_until(lambda: len(receiver.records) == 3)
    exporter.stop()
    assert sorted(receiver.ids(SCORE_ID)) == sorted(s.score_id for s in early)


def test_a_restarted_exporter_resumes_at_its_saved_cursor(store: ClientStore) -> None:
    receiver = LogsReceiver()
    first = exporter_for(store, receiver)
    early = scores(3)
    write_scores(store, early)
    drain(first)
    first.stop()  # saves its cursors
    late = scores(2)
    write_scores(store, late)
    store_alerts(store, [alert()])
    second = exporter_for(store, receiver)  # the same URL: the same cursors
    drain(second)
    second.stop()
    counted = Counter(receiver.ids(SCORE_ID))
    assert counted == Counter(s.score_id for s in early + late)
    assert len(receiver.ids(ALERT_KEY)) == 1


def test_only_the_tenants_asked_for_are_exported(store: ClientStore) -> None:
    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver, tenants=["b"])
    write_scores(store, scores(2, tenant="a") + scores(3, tenant="b"))
    drain(exporter)
    assert len(receiver.records) == 3
    assert {r.resource["pathgrade.tenant"] for r in receiver.records} == {"b"}


def test_a_row_committed_after_the_cursor_passed_its_time_is_sent_by_the_recount(
    store: ClientStore,
) -> None:
    receiver = LogsReceiver()
    exporter = exporter_for(store, receiver, recheck_window_s=600)
    time.sleep(1.1)  # the first second after the exporter started is counted whole
    [early] = scores(1)
    write_scores(store, [early])
    time.sleep(1.1)
    write_scores(store, scores(1))
    drain(exporter)
    assert len(receiver.records) == 2
    stored_at = store.query(
        "SELECT toUnixTimestamp64Nano(StoredAt) FROM scores WHERE ScoreId = {id:String}",
        {"id": early.score_id},
    ).rows[0][0]
    [late] = scores(1)  # inserted now with the time of `early`: as if it committed late
    when = datetime.datetime.fromtimestamp(int(stored_at) / 1e9, datetime.UTC)
    store.insert("scores", [[*score_row(late, 0), when]], [*SCORE_COLUMNS, "StoredAt"])
    drain(exporter)
    assert late.score_id not in receiver.ids(SCORE_ID)  # behind the cursor
    exporter.recheck()
    assert late.score_id in receiver.ids(SCORE_ID)
    assert exporter.stats.resent_late >= 1
    exporter.stop()


def test_bad_settings_are_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match="url"):
        ExportConfig(url="ftp://collector/v1/logs")
    with pytest.raises(ValidationError, match="headers"):
        ExportConfig(url="http://collector:4318", headers={"bad name": "x"})
    assert ExportConfig(url="http://collector:4318").url == "http://collector:4318/v1/logs"
    assert ExportConfig(url="http://c:4318/custom").url == "http://c:4318/custom"
    one = ExportConfig(url="http://c:4318", headers={"authorization": "a"})
    assert one.exporter_id == ExportConfig(url="http://c:4318", headers={"x": "b"}).exporter_id
    assert one.exporter_id != ExportConfig(url="http://c:4318", tenants=["t"]).exporter_id
