"""The collector as one component: config, start, stop.

Receivers (gRPC, HTTP) -> IngestPipeline (validate, redact, group) -> KafkaPublisher
(acks=all, spill-to-disk fallback): one for spans (`pathgrade.spans`, the spill in
`spill_dir`), one for log records (`pathgrade.logs`, its spill in `spill_dir/logs`: the same
guarantees, durable log included, for each topic).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from typing import Any

from kafka.errors import KafkaError
from pathgrade.collector.config import CollectorConfig, load_request_patterns
from pathgrade.collector.counters import IngestCounters
from pathgrade.collector.dead_letter import DeadLetterFile
from pathgrade.collector.facts import FactMaker, load_secret
from pathgrade.collector.grpc_receiver import TraceServiceHandler, start_grpc_server
from pathgrade.collector.http_receiver import OtlpHttpServer
from pathgrade.collector.log_trim import GroupOffsets
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.publisher import KafkaPublisher, producer_for
from pathgrade.collector.redact import Redactor
from pathgrade.collector.spill import SpillFile, SpillInUse, logs_spill_dir
from pathgrade.content.fingerprints import FactSecret
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas.stalls import STALLED, WRITE_FAILURES
from pathgrade.transport.bearer_tokens import TokenAuth
from pathgrade.transport.message_auth import message_key
from pathgrade.transport.signing import signing

log = logging.getLogger(__name__)


class KafkaUnavailable(RuntimeError):
    """The configured Kafka could not be reached at start."""


class Collector:
    """Both receivers over one pipeline. `start()`, then `stop()`; the pipeline counts
    into `counters` when given (the embedded stack shares them with its parent)."""

    def __init__(self, config: CollectorConfig, counters: IngestCounters | None = None) -> None:
        self.config = config
        self._counters = counters
        self.auth = TokenAuth.from_file(config.tokens_file)
        self.grpc_port = 0
        self.http_port = 0
        self.publisher: KafkaPublisher | None = None
        self.logs_publisher: KafkaPublisher | None = None
        self._group_offsets: GroupOffsets | None = None
        self._logs_group_offsets: GroupOffsets | None = None
        self.pipeline: IngestPipeline | None = None
        self._grpc = None
        self._http: OtlpHttpServer | None = None
        self._http_thread: threading.Thread | None = None

    def new_producer(self) -> Any:
        """A producer to Kafka (`producer_for`) whose messages carry the stack's MAC when
        the config has a message key (`transport.message_auth`)."""
        config = self.config
        producer = producer_for(config.kafka_bootstrap, config.ack_timeout_s)
        return signing(producer, message_key(config.message_key))

    def start(self) -> None:
        config = self.config
        # A bad key or policy file stops the start before any connection. The key is read with facts
        # off too: withheld values and identifiers are fingerprinted with it.
        secret = load_secret(config.facts_key_file, config.spill_dir)
        facts = self._fact_maker(secret)
        try:
            producer = self.new_producer()
        except KafkaError as exc:
            raise KafkaUnavailable(
                f"cannot reach Kafka at {config.kafka_bootstrap}: {exc}"
            ) from exc
        try:
            spill = SpillFile(config.spill_dir, config.spill_max_bytes)
            logs_dir = logs_spill_dir(config.spill_dir)
            logs_dir.mkdir(mode=0o700, exist_ok=True)
            logs_spill = SpillFile(logs_dir, config.spill_max_bytes)
        except SpillInUse as exc:
            producer.close(timeout=0)
            raise OSError(str(exc)) from exc
        if config.durable_log:
            self._group_offsets = GroupOffsets(
                config.kafka_bootstrap, config.log_groups, config.topic
            )
            self._logs_group_offsets = GroupOffsets(
                config.kafka_bootstrap, config.log_groups, config.logs_topic
            )
        self.publisher = KafkaPublisher(
            producer, spill, config.topic, config.ack_timeout_s,
            dead_letters=DeadLetterFile(config.spill_dir),
            renew=self.new_producer,
            committed=self._group_offsets,
        )  # fmt: skip
        self.logs_publisher = KafkaPublisher(
            self.new_producer(), logs_spill, config.logs_topic, config.ack_timeout_s,
            dead_letters=DeadLetterFile(logs_dir), renew=self.new_producer,
            committed=self._logs_group_offsets,
        )  # fmt: skip
        self.publisher.start()
        self.logs_publisher.start()
        self.pipeline = IngestPipeline(
            Redactor(config.redaction, facts, secret), self.publisher, config.max_message_bytes,
            self._counters, self.logs_publisher,
        )  # fmt: skip
        try:
            self._http = OtlpHttpServer(
                (config.listen_host, config.http_port), self.pipeline, self.auth,
                config.max_body_bytes, config.ack_timeout_s, config.receiver_workers,
                config.idle_timeout_s, config.read_timeout_s, config.min_body_rate,
                config.max_connections,
            )  # fmt: skip
        except OSError as exc:
            self._close_publishers()
            raise OSError(
                f"cannot listen for OTLP/HTTP on {config.listen_host}:{config.http_port}: "
                f"{exc.strerror or exc}; pass another --http-port"
            ) from exc
        self.http_port = self._http.server_address[1]
        try:
            self._grpc, self.grpc_port = start_grpc_server(
                TraceServiceHandler(self.pipeline, self.auth, config.ack_timeout_s),
                config.listen_host, config.grpc_port, config.max_body_bytes,
                config.receiver_workers, config.idle_timeout_s,
            )  # fmt: skip
        except OSError as exc:
            self._http.server_close()
            self._close_publishers()
            raise OSError(f"{exc}; pass another --grpc-port") from exc
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, name="otlp-http", daemon=True
        )
        self._http_thread.start()
        log.info("collector listening: grpc %d, http %d", self.grpc_port, self.http_port)

    def _fact_maker(self, secret: FactSecret) -> FactMaker | None:
        """The facts stage, with the deployment's secret (None with facts off)."""
        config = self.config
        if not config.facts:
            return None
        requests = load_request_patterns(config.policy)
        maker = FactMaker(secret, PiiScanner(config.redaction.extra_patterns), requests=requests)
        if maker.kernel is None:
            log.warning(
                "the fact kernel (pathgrade.collector._facts_kernel) is not built: every "
                "span's facts are computed in Python, at several times the CPU; reinstall "
                "pathgrade with a C compiler and the Python headers (python3-dev) to build it"
            )
        return maker

    def counters(self) -> dict[str, Any]:
        """Requests and spans since `start()`, the spill's bytes not yet in Kafka, the log's
        bytes not yet let go (with durable_log: not yet committed by its readers; else the
        same as the spill's), the entries of the dead-letter file (from earlier runs too),
        the writes the disk refused and what is stalled now (`schemas.stalls`)."""
        assert self.pipeline is not None
        publishers = self.publishers()
        return {
            **asdict(self.pipeline.counters),
            "spill_bytes": sum(p.spill.pending_bytes() for p in publishers),
            "log_bytes": sum(p.spill.held_bytes() for p in publishers),
            "dead_letter_messages": sum(p.dead_letters.entries for p in publishers),
            WRITE_FAILURES: sum(p.stalls.failures for p in publishers),
            STALLED: {what: why for p in publishers for what, why in p.stalls.current().items()},
        }

    def publishers(self) -> list[KafkaPublisher]:
        """The spans' publisher, then the log records' (once started)."""
        return [p for p in (self.publisher, self.logs_publisher) if p is not None]

    def _close_publishers(self) -> None:
        for publisher in self.publishers():
            publisher.close()

    def broker_replaced(self, bootstrap: str, lost: bool, keep_old: bool = False) -> None:
        """After `publisher.hold()`: send on to the broker at `bootstrap`, which replaced the
        one this collector sent to; `lost` (that one died with what it held): from where
        its readers committed; `keep_old` (its readers still read it): the log keeps what
        went there until `old_broker_read` (`KafkaPublisher.resume`)."""
        self.config = self.config.model_copy(update={"kafka_bootstrap": bootstrap})
        for offsets in (self._group_offsets, self._logs_group_offsets):
            if offsets is not None:
                offsets.move_to(bootstrap)
        for publisher in self.publishers():
            publisher.resume(self.new_producer(), lost=lost, keep_old=keep_old)

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, finish in-flight requests, flush to Kafka (or keep in spill)."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace_s).wait()
        self._close_publishers()
        for offsets in (self._group_offsets, self._logs_group_offsets):
            if offsets is not None:
                offsets.close()
