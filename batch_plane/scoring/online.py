"""The online scorer: consumer group `pathgrade-scorer` on `pathgrade.sampled`.

Each message is a `SampledTrace`: one agent turn of a trace. The scorer loads the trace's
spans from the store (waiting a little for the store writer), cuts out the turn
(`content.agent_turns.turn_at`: the whole trace for a message naming none), scores it with
the metrics its risk tier is assigned (each score on the turn's top span), writes the
scores and their counts for the score monitors (`score_rollups`), and only then commits
the offset. Each score is also handed
to `on_event` in the GenAI `gen_ai.evaluation.result` shape, for users who export scores
back as span events.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pathgrade.batch_plane.scoring.judge import Judge
from pathgrade.batch_plane.scoring.online_config import OnlineScorerConfig
from pathgrade.batch_plane.scoring.score_rollups import write_score_rollups
from pathgrade.batch_plane.scoring.scores import evaluation_event, write_scores
from pathgrade.batch_plane.scoring.trace_scorers import JUDGE_METRICS, TraceScorer, UnknownMetric
from pathgrade.batch_plane.store.trace_rows import load_trace
from pathgrade.content.agent_turns import turn_at
from pathgrade.detectors.monitor_policy import MonitorsPolicy
from pathgrade.detectors.policy import RISK_TIERS, Policy
from pathgrade.schemas.evaluation_records import JUDGE_ERROR_LABEL
from pathgrade.schemas.model import Trace
from pathgrade.schemas.sampled import SampledTrace
from pathgrade.schemas.store import Store
from pathgrade.transport.consumer import TopicConsumer, authentic
from pathgrade.transport.message_auth import message_key
from pydantic import ValidationError

log = logging.getLogger(__name__)


def metrics_for(
    sampled: SampledTrace, policy: Policy | None, tier_metrics: Mapping[str, tuple[str, ...]]
) -> tuple[str, ...] | None:
    """The metrics for a sampled trace: the policy's `scorers` for its service, agent and
    risk tier when the policy sets them, else the tier default (None: unknown tier)."""
    if policy is not None:
        tier = sampled.risk_tier if sampled.risk_tier in RISK_TIERS else None
        assigned = policy.resolve(sampled.service, sampled.agent, tier).scorers
        if assigned is not None:
            return assigned
    return tier_metrics.get(sampled.risk_tier)


@dataclass
class OnlineScorerStats:
    messages: int = 0
    scored: int = 0
    scores: int = 0
    skipped: int = 0  # undecodable, never stored, or no scorers for it
    judge_failures: int = 0  # judge scores written as `judge_error` (no value)
    forged_messages: int = 0  # refused: no or a wrong MAC under the stack's message key

    def plus(self, other: OnlineScorerStats) -> OnlineScorerStats:
        """These counts and `other`'s, summed (the scorers of one `pathgrade scorer`)."""
        return OnlineScorerStats(**{name: getattr(self, name) + getattr(other, name)
                                    for name in self.__dataclass_fields__})  # fmt: skip


class OnlineScorer:
    """Consume, load, score, write, then commit. `run` until `stop` is set."""

    def __init__(
        self,
        config: OnlineScorerConfig,
        store: Store,
        judge: Judge | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.on_event = on_event
        self.stats = OnlineScorerStats()
        self.message_key = message_key(config.message_key)
        self.judge = judge
        policy = config.policy
        self.monitors = policy.monitors if policy is not None else MonitorsPolicy()
        self._scorers: dict[tuple[str, ...], TraceScorer] = {}
        self.consumer = TopicConsumer(
            config.bootstrap_servers, config.group_id, config.topic, config.session_timeout_ms,
            max_poll_records=50, **config.consumer_options,
        )  # fmt: skip

    def _scorer(self, metrics: tuple[str, ...]) -> TraceScorer:
        """One TraceScorer per metric set (judge metrics only when a judge is set)."""
        if metrics not in self._scorers:
            usable = tuple(m for m in metrics if self.judge is not None or m not in JUDGE_METRICS)
            self._scorers[metrics] = TraceScorer(usable, self.judge, record_judge_failures=True)
        return self._scorers[metrics]

    def run(self, stop: threading.Event) -> None:
        self.consumer.run(stop, lambda: self.poll_once(stop))

    def poll_once(self, stop: threading.Event | None = None, timeout_ms: int = 200) -> None:
        """Score each polled message and commit it once its scores are stored (a forged one
        is refused, counted and committed past)."""
        for partition, messages in self.consumer.poll(timeout_ms=timeout_ms).items():
            for message in messages:
                self.stats.messages += 1
                if authentic(partition, message, self.message_key, self.stats):
                    self.handle(message.value, stop)
                self.consumer.commit({partition: message.offset + 1})

    def handle(self, value: bytes, stop: threading.Event | None = None) -> None:
        """Score one `pathgrade.sampled` message (logs and skips what cannot be scored)."""
        try:
            sampled = SampledTrace.from_json(value)
        except ValidationError as exc:
            self.stats.skipped += 1
            log.error("skipping undecodable pathgrade.sampled message: %s", exc)
            return
        metrics = metrics_for(sampled, self.config.policy, self.config.tier_metrics)
        if metrics is None:
            self.stats.skipped += 1
            log.error("trace %s: no scorers for risk tier %r", sampled.trace_id, sampled.risk_tier)
            return
        try:
            scorer = self._scorer(metrics)
        except UnknownMetric as exc:  # a policy naming a metric pathgrade does not score
            self.stats.skipped += 1
            log.error("trace %s: %s", sampled.trace_id, exc)
            return
        trace = self._wait_for_trace(sampled, stop)
        if trace is None:
            self.stats.skipped += 1
            log.error("trace %s of %s was not stored within %.0f s", sampled.trace_id,
                      sampled.tenant, self.config.trace_wait_s)  # fmt: skip
            return
        turn = turn_at(trace, sampled.turn_span_id)
        scores = scorer.score(turn)
        write_scores(self.store, scores)
        write_score_rollups(self.store, sampled, turn, scores, self.monitors)
        self.stats.scored += 1
        self.stats.scores += len(scores)
        failed = [s for s in scores if s.label == JUDGE_ERROR_LABEL]
        self.stats.judge_failures += len(failed)
        for score in failed:
            log.error("trace %s: %s: %s", sampled.trace_id, score.metric, score.explanation)
        if self.on_event:
            for score in scores:
                self.on_event(evaluation_event(score))

    def _wait_for_trace(self, sampled: SampledTrace, stop: threading.Event | None) -> Trace | None:
        deadline = time.monotonic() + self.config.trace_wait_s
        while True:
            trace = load_trace(self.store, sampled.tenant, sampled.trace_id)
            if trace is not None or time.monotonic() >= deadline or (stop and stop.is_set()):
                return trace
            time.sleep(0.5)

    def close(self) -> None:
        self.consumer.close()
