"""RealtimePlane: consumer group `pathgrade-realtime` on `pathgrade.spans` and, co-partitioned
with it, `pathgrade.logs` (GenAI events as log records, joined to their spans' turns).

poll -> decode -> assemble (agent turns, records joined) -> (due turns) detectors ->
alerts (Kafka topic, `alerts` table, webhook, log line) and samples (Kafka topic) ->
commit. Offsets (of both topics) are committed only up to the lowest offset still
buffered per partition, and only once the
alerts are stored, so a crash or a rebalance re-reads unfinished traces. Re-read traces
alert again only in the webhook and topic; the `alerts` table is idempotent on (tenant,
alert key). The alerts of each partition are numbered in the order they are found (from
the highest number the table holds for it when the partition is assigned), so the webhook
delivers them at least once from the table (`realtime_plane.delivery`). With a turns
topic, conversation turns are shared with the group's other consumers
(`realtime_plane.turns`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kafka import KafkaProducer, TopicPartition
from pathgrade.content.otlp import decode_kafka_message, reader_built
from pathgrade.detectors import load_policy
from pathgrade.realtime_plane.assembler import DueTurn, TurnAssembler
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.realtime_plane.counters import MONITOR_TURNS, RealtimeCounters
from pathgrade.realtime_plane.coverage import COVERAGE, DETECTOR_ERRORS
from pathgrade.realtime_plane.delays import DelayWindow
from pathgrade.realtime_plane.delivery import MONITOR_STREAM, AlertBacklog
from pathgrade.realtime_plane.evaluate import Evaluation, TurnEvaluator
from pathgrade.realtime_plane.monitors import MonitorReads, MonitorRunner
from pathgrade.realtime_plane.rollups import TurnRollups
from pathgrade.realtime_plane.sampler import Sampler
from pathgrade.realtime_plane.sinks import (
    AlertSink,
    LogAlertSink,
    NumberedAlert,
    StoreAlertSink,
    TopicAlertSink,
    WebhookSink,
)
from pathgrade.realtime_plane.turns import TurnBatcher, TurnFeed
from pathgrade.schemas.alert_store import AlertStore
from pathgrade.schemas.alerts import Alert
from pathgrade.transport.consumer import Partitions, TopicConsumer, decode_records, decode_spans
from pathgrade.transport.drain import DRAIN_IDLE_S, read_until_drained
from pathgrade.transport.kafka_settings import kafka_client_settings
from pathgrade.transport.message_auth import message_key
from pathgrade.transport.signing import signing
from pathgrade.transport.standby import StandbyMember

log = logging.getLogger(__name__)
COMMIT_INTERVAL_S = 1.0  # store alerts and commit at most this often: inserts are costly
# Alerts go to the sinks in groups of this many (and at the end of each poll): waking the
# webhook's threads per alert cost the polling thread the interpreter lock per alert.
ALERTS_PER_DELIVERY = 32
IDLE_POLL_MS = 500  # a poll's longest wait while nothing is held (see `_poll_timeout_ms`)
TURNS_POLL_INTERVAL_S = 0.2  # publish own turns and read the others' at most this often


class RealtimePlane:
    """`start()` runs the plane in a thread; `stop()` flushes sinks, commits, closes."""

    def __init__(
        self,
        config: RealtimeConfig,
        alert_store: AlertStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        monitor_reads: MonitorReads | None = None,
        monitor_clock: Callable[[], float] = time.time,
    ) -> None:
        """`alert_store` (the store room's `AlertRecords` over the store) stores the
        alerts, their numbers and the webhook's delivery cursors; without it alerts are not
        stored. `monitor_reads` (the store's queries of the monitors' tables) evaluates the
        policy's monitors in the consumer that owns partition 0, with `monitor_clock`'s
        Unix seconds as now; without it (or without `alert_store`) they are not evaluated."""
        self.config = config
        self.clock = clock
        self.message_key = message_key(config.message_key)
        if not reader_built():
            log.warning(
                "the OTLP reader (pathgrade.content._otlp_reader) is not built: every span "
                "message is parsed by upb and read in Python, ~1.2x the realtime plane's CPU; "
                "reinstall pathgrade with a C compiler and the Python headers (python3-dev)"
            )
        policy = load_policy(config.policy_path)
        name = Path(config.policy_path).name if config.policy_path else "default"
        self.assembler = TurnAssembler(
            config.quiet_window_s, config.max_age_s, config.max_traces, config.max_spans,
            config.recent_traces, config.parent_wait_s, config.recent_spans,
            decode_kafka_message,
        )  # fmt: skip
        self.evaluator = TurnEvaluator(
            policy, name, config.conversation_cache_size, config.conversation_turns,
            config.recent_traces, config.coverage_window_s,
        )  # fmt: skip
        self.sampler = Sampler(config.sampler)
        self.rollups = TurnRollups(policy.monitors)
        self.alert_store = alert_store
        self.store_sink = (
            StoreAlertSink(alert_store, self._stored) if alert_store is not None else None
        )
        self.webhook: WebhookSink | None = None
        self.producer: Any = None  # a KafkaProducer, signing with the message key
        self.sinks: list[AlertSink] = [LogAlertSink()]
        """Every alert output, in the order each group of alerts is handed over (the log
        line, the alerts topic, the table; the webhook joins at `start`)."""
        if config.alerts_topic:
            self.sinks.append(TopicAlertSink(config.alerts_topic, lambda: self.producer))
        if self.store_sink is not None:
            self.sinks.append(self.store_sink)
        self.monitors = self._monitor_runner(policy, name, monitor_reads, monitor_clock)
        self.counters_ = RealtimeCounters()
        self.delays = DelayWindow()
        # alerts of this poll (with their partition), not yet handed to the sinks
        self._outgoing: list[tuple[int, Alert]] = []
        self._next_number: dict[int, int] = {}  # partition -> the number of its next alert
        self.assigned: set[int] = set()
        self.joined: Any = threading.Event()  # set at the first partitions; any Event type
        self._committed: dict[tuple[str, int], int] = {}  # (topic, partition) -> offset
        self._rewind_to: dict[tuple[str, int], int] = {}  # of a revoked partition: committed
        self._last_commit = float("-inf")
        self._last_turns_poll = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.consumer: TopicConsumer | None = None
        self._standby: StandbyMember | None = None  # joined on the next broker (`prepare`)
        self.worker = uuid.uuid4().hex[:16]  # tells this consumer's turns from the others'
        self.turn_batcher = TurnBatcher(self.worker)
        self.turn_feed = (
            TurnFeed(config.bootstrap_servers, config.turns_topic, self.worker,
                     config.turns_lookback_s, self.message_key)
            if config.turns_topic else None
        )  # fmt: skip

    def _monitor_runner(
        self,
        policy: Any,
        name: str,
        reads: MonitorReads | None,
        clock: Callable[[], float],
    ) -> MonitorRunner | None:
        """The runner of the policy's monitors, if it declares any and they can be read."""
        if not policy.monitors.all():
            return None
        if reads is None or self.alert_store is None:
            log.warning("the policy declares monitors, but this realtime plane has no store "
                        "to read their rollups from: they are not evaluated")  # fmt: skip
            return None
        return MonitorRunner(
            policy.monitors, name, reads, self.alert_store, self._claim_monitor_stream,
            self._deliver_monitor_alert, clock,
        )  # fmt: skip

    def _claim_monitor_stream(self) -> int:
        """Have the webhook deliver the monitors' alerts (from its saved cursor); the next
        number of the stream. Raises the store's errors."""
        assert self.alert_store is not None  # the monitors run only with a store
        stored = self.alert_store.latest_numbers()
        if self.webhook is not None:
            self.webhook.claim({MONITOR_STREAM}, stored)
        return stored.get(MONITOR_STREAM, 0) + 1

    def _deliver_monitor_alert(self, numbered: NumberedAlert) -> None:
        """A monitor's alert, stored: to every other sink (from the monitors' thread)."""
        if self.webhook is not None:
            self.webhook.stored({MONITOR_STREAM: numbered.number})
        for sink in self.sinks:
            if sink is not self.store_sink:
                sink.add([numbered])

    def start(self, standby: StandbyMember | None = None) -> None:
        """Connect to Kafka and run the plane in a daemon thread (again after `suspend`;
        with `standby`'s consumer, joined already: `hand_over`)."""
        config = self.config
        self._stop.clear()
        if self.turn_feed is not None:
            self.turn_feed.start()
        if standby is None:
            self.consumer = self._consumer(self.revoke, self._assigned)
        else:
            self.consumer, assigned = standby.take()
            if assigned:
                self._assigned(assigned)
        if config.alerts_topic or config.sampled_topic or config.turns_topic:
            # Alerts, samples and turns are not on the webhook's path: lingering 100 ms fills
            # batches instead of waking the sender for nearly every message (at 3,000
            # spans/s, 57% of a core for the whole plane against 65-69% at 5 ms).
            self.producer = signing(
                KafkaProducer(
                    **kafka_client_settings(config.bootstrap_servers), linger_ms=100, acks=1
                ),
                self.message_key,
            )
        if config.webhook_url and self.webhook is None:
            backlog = (
                AlertBacklog(self.alert_store, config.webhook_url)
                if self.alert_store is not None
                else None
            )
            self.webhook = WebhookSink(
                config.webhook_url, config.webhook_queue_size, config.webhook_retries,
                config.webhook_timeout_s, backlog=backlog,
            )  # fmt: skip
            self.sinks.append(self.webhook)
        self._thread = threading.Thread(target=self._run, name="realtime-plane", daemon=True)
        self._thread.start()

    def _consumer(self, revoked: Partitions, assigned: Partitions) -> TopicConsumer:
        """A member of the plane's group on its broker, with these rebalance callbacks."""
        config = self.config
        return TopicConsumer(
            config.bootstrap_servers, config.group_id, config.spans_topic,
            config.session_timeout_ms, on_revoked=revoked,
            on_assigned=assigned, also=(config.logs_topic,) if config.logs_topic else (),
            max_poll_records=2000, fetch_max_wait_ms=config.fetch_max_wait_ms,
            idle_fetch_wait_ms=config.idle_fetch_wait_ms,
        )  # fmt: skip

    def prepare(self, bootstrap: str, timeout_s: float = 30.0) -> bool:
        """Join the group on the broker at `bootstrap` (a fresh one about to replace this
        plane's) beside the current consumer, reading nothing yet (`StandbyMember`), so
        that `hand_over` waits on no group join; True once the group handed it partitions
        within `timeout_s` (with several consumers, one may get none)."""
        self.config = self.config.model_copy(update={"bootstrap_servers": bootstrap})
        if self.turn_feed is not None:
            self.turn_feed.bootstrap_servers = bootstrap
        self._standby = StandbyMember(self._consumer, self.revoke, self._assigned)
        return self._standby.joined.wait(timeout_s)

    def hand_over(self, targets: dict[int, int] | None = None) -> set[int]:
        """`suspend` on the current broker (read up to `targets`, evaluate every trace held:
        that broker's data is about to end), then poll on with the consumer `prepare`
        joined on the next one. Returns the partitions of `targets` it reached."""
        assert self._standby is not None, "hand_over without prepare"
        reached = self.suspend(targets, release_held=True)
        standby, self._standby = self._standby, None
        self.start(standby)
        return reached

    def _run(self) -> None:
        assert self.consumer is not None
        self.consumer.run(  # keep the plane alive on any failure; offsets stay uncommitted
            self._stop, self.poll_once,
            lambda _: log.exception("realtime plane: poll failed; retrying"),
            retry=(Exception,), retry_s=1.0,
        )  # fmt: skip

    def poll_once(self) -> int:
        """One poll: buffer the spans, evaluate due turns, emit (Kafka, webhook, log line);
        every COMMIT_INTERVAL_S store the alerts and commit, so a slow insert never holds
        up detection for long. Returns the messages read."""
        assert self.consumer is not None
        records = self.consumer.poll(timeout_ms=self._poll_timeout_ms())
        now = self.clock()
        for partition, messages in records.items():
            for message in messages:
                self._add(partition, message, now)
        share_turns = (
            self.turn_feed is not None and now - self._last_turns_poll >= TURNS_POLL_INTERVAL_S
        )
        if share_turns:
            self._last_turns_poll = now
            self._read_turns()
        for due in self.assembler.due(now):
            self._evaluate(due)
        self._deliver_alerts()
        if share_turns:
            self._publish_turns()
        if now - self._last_commit >= COMMIT_INTERVAL_S:
            self._last_commit = now
            self._flush_and_commit()
        return sum(map(len, records.values()))

    def _poll_timeout_ms(self) -> int:
        """The configured wait while alerts are held or turns are shared; while traces are
        held, until the first of them falls due (`TurnAssembler.next_due`), never shorter
        than the configured wait nor longer than IDLE_POLL_MS; with nothing held, up to
        IDLE_POLL_MS. Nothing falls due before a span arrives or its time comes, and a poll
        returns as soon as a span arrives (an idle plane at 50 ms: 3.5% of a core, at 500
        ms: 1.8%, bench/idle_cpu.py; a trace held 1 s after its last span no longer costs
        20 polls)."""
        configured = self.config.poll_timeout_ms
        if self.turn_feed is not None or self._outgoing:
            return configured
        until_due_ms = (self.assembler.next_due() - self.clock()) * 1000  # inf: none held
        return max(configured, math.ceil(min(until_due_ms, IDLE_POLL_MS)))

    def _publish_turns(self) -> None:
        """Publish the digests of the turns evaluated since the last publish, batched (a
        Kafka record per turn cost more than evaluating it)."""
        assert self.producer is not None
        for message in self.turn_batcher.take():
            self.producer.send(self.config.turns_topic, **message)

    def _read_turns(self) -> None:
        """Keep the turns other consumers published since the last read (a poll of a
        consumer costs the same with nothing new, so it runs every
        TURNS_POLL_INTERVAL_S, not on every poll of the spans)."""
        assert self.turn_feed is not None
        digests = self.turn_feed.poll(self.counters_)
        self.counters_.turns_received += len(digests)
        for digest in digests:
            self.evaluator.remember(digest)

    def _add(self, partition: TopicPartition, message: Any, now: float) -> None:
        self.counters_.messages += 1
        if partition.topic == self.config.logs_topic:
            records = decode_records(partition, message, self.counters_, self.message_key)
            self.counters_.log_records += len(records)
            self.assembler.add_records(partition.partition, message.offset, records, now)
            return
        spans = decode_spans(partition, message, self.counters_, self.message_key)
        self.counters_.spans += len(spans)
        self.assembler.add(partition.partition, message.offset, spans, now, message)

    def _evaluate(self, due: DueTurn) -> None:
        """Evaluate one released turn and emit what it found. A turn whose evaluation
        raises (a detector's bug, or ids a foreign producer malformed so that its alerts
        fail validation) is logged with the error and skipped: the assembler has already
        released it and the turns due with it, so raising would lose those too."""
        try:
            evaluation = self.evaluator.evaluate(due, time.time_ns())
        except Exception:
            self.counters_.evaluation_failures += 1
            log.exception("evaluating turn %s of trace %s of tenant %s failed; skipped",
                          due.turn.top_span_id, due.turn.trace_id, due.turn.tenant)  # fmt: skip
            return
        self._emit(evaluation)

    def _emit(self, evaluation: Evaluation) -> None:
        self.counters_.traces_evaluated += 1
        self.rollups.observe(evaluation)
        due = evaluation.due
        if due.reason == "quiet" and not due.re_evaluation:
            last_received_ns = max(span.received_at_ns for span in due.turn.spans)
            self.delays.add((time.time_ns() - last_received_ns) / 1e9)
        alerts = evaluation.new_alerts
        self.counters_.alerts += len(alerts)
        self._outgoing += [(due.partition, alert) for alert in alerts]
        if len(self._outgoing) >= ALERTS_PER_DELIVERY:
            self._deliver_alerts()
        self._share_turn(evaluation)
        if due.re_evaluation and not alerts:
            return  # sampled when first evaluated; only new findings re-sample it
        sample = self.sampler.decide(evaluation, time.time_ns())
        if sample is not None and self.producer and self.config.sampled_topic:
            self.counters_.sampled += 1
            self.producer.send(
                self.config.sampled_topic, sample.to_json(), sample.trace_id.encode()
            )

    def _deliver_alerts(self) -> None:
        """Number the alerts of the turns evaluated since the last call and hand them to
        every sink at once (the webhook's threads are woken once per group, not once per
        alert). A partition's first alerts wait for its numbering (`claim`) to be known:
        raising, they stay for the next call."""
        if not self._outgoing:
            return
        unclaimed = {partition for partition, _ in self._outgoing} - self._next_number.keys()
        if unclaimed:
            self.claim(unclaimed)
        outgoing, self._outgoing = self._outgoing, []
        alerts = [NumberedAlert(p, self._take_number(p), alert) for p, alert in outgoing]
        for sink in self.sinks:
            sink.add(alerts)

    def _take_number(self, partition: int) -> int:
        number = self._next_number[partition]
        self._next_number[partition] = number + 1
        return number

    def claim(self, partitions: set[int]) -> None:
        """Number the alerts of `partitions` on from the highest number the table holds for
        each, and have the webhook deliver them from its saved cursors. Raises the store's
        errors (the alerts then wait: `_deliver_alerts`)."""
        stored = self.alert_store.latest_numbers() if self.alert_store is not None else {}
        if self.webhook is not None:
            self.webhook.claim(partitions, stored)
        for partition in partitions:
            self._next_number[partition] = stored.get(partition, 0) + 1

    def _release(self, partitions: set[int]) -> None:
        """Forget the numbering of `partitions` (their next reader numbers on from what
        the table holds) and stop delivering their alerts; with partition 0, stop the
        monitors and their alerts' delivery (its next owner takes both over)."""
        if 0 in partitions and self.monitors is not None:
            self.monitors.release()
            partitions = partitions | {MONITOR_STREAM}
        for partition in partitions:
            self._next_number.pop(partition, None)
        if self.webhook is not None:
            self.webhook.release(partitions)

    def _stored(self, numbers: dict[int, int]) -> None:
        """The store sink stored the alerts up to these numbers (partition -> highest)."""
        if self.webhook is not None:
            self.webhook.stored(numbers)

    def _share_turn(self, evaluation: Evaluation) -> None:
        """Queue a conversation turn's digest for the group's other consumers."""
        digest = evaluation.digest
        if self.turn_feed is not None and digest is not None and self.turn_batcher.add(digest):
            self.counters_.turns_shared += 1

    def _flush_and_commit(self, partitions: set[int] | None = None) -> None:
        """Commit what may be committed: offsets whose traces' alerts are stored.

        In the polling loop (`partitions` None) alerts are stored in the background and
        the offsets of the previous background insert are committed; on a revoke or at
        stop, everything pending is stored now and then committed. Alerts not yet handed
        to the sinks (a poll that failed after evaluating) are handed over first.
        """
        self._deliver_alerts()
        sink = self.store_sink
        rollups = self.rollups.take()
        if sink is not None:
            sink.add_rollups(rollups)
        if sink is None:
            self._commit(self._committable(), partitions)
        elif partitions is None and not self._stop.is_set():
            stored = sink.stored_token()
            if stored is not None:
                self._commit(stored, None)
            sink.flush_async(self._committable())
        else:
            try:
                sink.flush()
            except Exception as exc:  # the store's QueryError or transport errors
                self.counters_.store_failures += 1
                log.error("storing alerts failed, offsets not committed: %s", exc)
                return
            self._commit(self._committable(), partitions)

    def _committable(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the next offset to commit, of spans and records."""
        config = self.config
        out = {(config.spans_topic, p): o for p, o in self.assembler.committable().items()}
        if config.logs_topic:
            records = self.assembler.committable_records()
            out.update({(config.logs_topic, p): o for p, o in records.items()})
        return out

    def _commit(self, committable: dict[tuple[str, int], int], partitions: set[int] | None) -> None:
        """Commit `committable` offsets (of `partitions`, when given) not yet committed."""
        targets = {
            (t, p): o for (t, p), o in committable.items()
            if self._committed.get((t, p)) != o and (partitions is None or p in partitions)
            and p in self.assigned
        }  # fmt: skip
        if not targets:
            return
        assert self.consumer is not None
        if self.producer is not None:
            self.producer.flush()
        self.consumer.commit({self.consumer.partition(p, t): o for (t, p), o in targets.items()})
        self._committed.update(targets)
        self.counters_.commits += 1

    def _assigned(self, partitions: set[int]) -> None:
        """Partitions arrived: read again from its commit each partition this consumer gave
        up in this rebalance (forgetting what it held of it) and got back, remember what
        their previous reader alerted, and number their alerts on from what the table
        holds; with partition 0, evaluate the monitors."""
        self.assigned |= partitions
        self.joined.set()
        returned = {k: o for k, o in self._rewind_to.items() if k[1] in partitions}
        self._rewind_to.clear()  # one rebalance: a partition assigned later reads afresh
        if returned and self.consumer is not None:
            self.consumer.seek(returned)
        try:
            self._recall_alerted(partitions)
            self.claim(partitions)
        except Exception as exc:  # claimed again when their first alerts are handed over
            log.warning("numbering alerts of partitions %s failed: %s", sorted(partitions), exc)
        if self.monitors is not None and 0 in partitions:
            self.monitors.claim()

    def _recall_alerted(self, partitions: set[int]) -> None:
        """Have the evaluator remember the alerts stored for `partitions` in the last two
        maximum ages (a trace still held when its partition moved was first read within
        one; the second allows for clocks apart): a turn its previous reader graded and
        this one re-reads (from the committed offset, below the traces it held) is
        evaluated again but raises none of them again."""
        if self.alert_store is None:
            return
        since_ns = time.time_ns() - int(2 * self.config.max_age_s * 1e9)
        for trace, keys in self.alert_store.alerted_since(partitions, since_ns).items():
            self.evaluator.alerted(trace, keys)

    def revoke(self, partitions: set[int]) -> None:
        """Commit up to the held traces of `partitions`, then forget them (their next owner
        re-reads them: this consumer too, `_assigned`)."""
        self._flush_and_commit(partitions)
        self.assembler.forget_partitions(partitions)
        for key in [k for k in self._committed if k[1] in partitions]:
            self._rewind_to[key] = self._committed.pop(key)  # read again from it, if back
        self.assigned -= partitions
        self._release(partitions)

    def counters(self) -> dict[str, Any]:
        """Plane, assembler and webhook counters and the recent detection delays
        (`realtime_plane.delays`) in one flat mapping of numbers, plus two structured
        entries: `detector_errors` (code -> exceptions raised) and `coverage` (the
        coverage figures, `realtime_plane.coverage`)."""
        out: dict[str, Any] = {**asdict(self.counters_), **asdict(self.assembler.stats)}
        out.update(traces_held=self.assembler.traces_held, spans_held=self.assembler.spans_held,
                   records_held=self.assembler.records_held)  # fmt: skip
        out["duplicates_suppressed"] = self.evaluator.duplicates_suppressed
        out[DETECTOR_ERRORS] = dict(self.evaluator.detector_errors)
        out[COVERAGE] = self.evaluator.coverage.figures()
        out[MONITOR_TURNS] = self.rollups.figures()
        if self.monitors is not None:
            out.update(asdict(self.monitors.stats))
        out.update(self.delays.quantiles())
        if self.store_sink is not None:
            out["alerts_rejected"] = self.store_sink.rejected
        if self.webhook is not None:
            stats = asdict(self.webhook.stats)
            out.update({f"webhook_{k}": v for k, v in stats.items() if k != "latest_error"})
        return out

    def reached(self, targets: dict[int, int]) -> set[int]:
        """The partitions of `targets` (partition -> next offset) this consumer is assigned
        and has read past."""
        consumer = self.consumer
        assert consumer is not None
        return {
            p for p, o in targets.items()
            if p in self.assigned and consumer.position(consumer.partition(p)) >= o
        }  # fmt: skip

    def suspend(
        self,
        targets: dict[int, int] | None = None,
        release_held: bool = False,
        timeout_s: float = 60.0,
        keep_webhook: bool = False,
    ) -> set[int]:
        """Stop polling, read on up to `targets` (partition -> next offset; what the
        collector produced) on the partitions assigned to this consumer, store the alerts,
        commit and close the Kafka clients; `start()` resumes on whatever broker is there
        then. Returns the partitions of `targets` it reached (with consumers in a group,
        the caller checks that together they reached all). Traces still held stay
        uncommitted, to be re-read on a lasting Kafka; with `release_held` (the broker's
        data is about to be discarded) they are evaluated now instead
        (`TraceAssembler.release_all`). The partitions' alerts go on to the webhook only
        with `keep_webhook` (until it closes); else whoever reads them next delivers
        them. The monitors stop until partition 0 is assigned again."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.monitors is not None:
            self.monitors.release()
        targets = targets or {}
        reached: set[int] = set()
        if self.consumer is not None:
            read_until_drained(
                self.poll_once,
                lambda: self.reached(targets) >= targets.keys() & self.assigned,
                timeout_s,
                DRAIN_IDLE_S if release_held else 0.0,
            )
            reached = self.reached(targets)
            for due in self.assembler.release_all() if release_held else ():
                self._evaluate(due)
            if self.turn_feed is not None:
                self._publish_turns()
            self._flush_and_commit()
            self.assembler.forget_partitions(set(self.assigned))  # re-read when resumed
            self.consumer.close()
            self.consumer = None
            if not keep_webhook:
                self._release(set(self.assigned))
            self._next_number.clear()
            self.assigned.clear()
            self._committed.clear()
            self._rewind_to.clear()  # a new consumer reads from the committed offsets
        if self.producer is not None:
            self.producer.flush()
            self.producer.close()
            self.producer = None
        if self.turn_feed is not None:
            self.turn_feed.close()
        return reached

    def stop(
        self,
        targets: dict[int, int] | None = None,
        release_held: bool = False,
        timeout_s: float = 60.0,
    ) -> set[int]:
        """`suspend`, then deliver queued webhooks and close for good."""
        reached = self.suspend(targets, release_held, timeout_s, keep_webhook=True)
        if self.webhook is not None:
            self.webhook.close()
        return reached
