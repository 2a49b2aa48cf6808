"""The collector as one component: config, start, stop.

Receivers (gRPC, HTTP) -> IngestPipeline (validate, redact, group) -> KafkaPublisher
(acks=all, spill-to-disk fallback).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from pathlib import Path

from kafka.errors import KafkaError
from pathgrade.collector.auth import TokenAuth
from pathgrade.collector.dead_letter import DeadLetterFile
from pathgrade.collector.facts import FactMaker, load_secret
from pathgrade.collector.grouping import DEFAULT_MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES_LIMIT
from pathgrade.collector.grpc_receiver import TraceServiceHandler, start_grpc_server
from pathgrade.collector.http_receiver import OtlpHttpServer
from pathgrade.collector.http_server import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_WORKERS,
)
from pathgrade.collector.limits import DEFAULT_MAX_BODY_BYTES
from pathgrade.collector.log_trim import GroupOffsets
from pathgrade.collector.pipeline import IngestCounters, IngestPipeline
from pathgrade.collector.publisher import KafkaPublisher, producer_for
from pathgrade.collector.redact import RedactionConfig, Redactor
from pathgrade.collector.spill import DEFAULT_SPILL_BYTES, SpillFile, SpillInUse
from pathgrade.schemas.pii import PiiScanner
from pathgrade.schemas.topics import REALTIME_GROUP, SPANS_TOPIC, STORE_GROUP
from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)


class CollectorConfig(BaseModel):
    """Everything the collector needs; every field has a documented default."""

    model_config = ConfigDict(extra="forbid")

    kafka_bootstrap: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    spill_dir: Path = Field(description="Directory of the local spill file")
    listen_host: str = "127.0.0.1"
    grpc_port: int = Field(4317, ge=0, le=65535, description="OTLP/gRPC port (0: any free)")
    http_port: int = Field(4318, ge=0, le=65535, description="OTLP/HTTP port (0: any free)")
    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    max_message_bytes: int = Field(
        DEFAULT_MAX_MESSAGE_BYTES, gt=0, le=MAX_MESSAGE_BYTES_LIMIT,
        description="Largest Kafka message; also the most one span may encode to",
    )  # fmt: skip
    spill_max_bytes: int = Field(DEFAULT_SPILL_BYTES, gt=0)
    ack_timeout_s: float = Field(
        5.0, gt=0, le=8.0,
        description="Wait for Kafka before spilling; at most 8 s, so that a request is "
        "answered before the OTLP exporters' default 10 s timeout",
    )  # fmt: skip
    receiver_workers: int = Field(
        DEFAULT_WORKERS, gt=0, le=1024, description="Request threads of each receiver"
    )
    idle_timeout_s: float = Field(
        DEFAULT_IDLE_TIMEOUT_S, gt=0, description="Close connections idle this long"
    )
    read_timeout_s: float = Field(
        DEFAULT_READ_TIMEOUT_S, gt=0,
        description="OTLP/HTTP: answer 408 to a request that sends nothing this long",
    )  # fmt: skip
    tokens_file: Path | None = Field(None, description="YAML mapping bearer token -> tenant")
    durable_log: bool = Field(
        False,
        description="Acknowledge once on local disk: append every accepted message to the "
        "spill (fsynced) and keep it there until the `log_groups` committed it, so a broker "
        "that keeps nothing on disk loses nothing acknowledged (the embedded stack's default)",
    )
    log_groups: list[str] = Field(
        default_factory=lambda: [STORE_GROUP, REALTIME_GROUP],
        min_length=1,
        description="With durable_log: the consumer groups of `topic` that must commit a "
        "message before the log lets it go",
    )
    topic: str = SPANS_TOPIC
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    facts: bool = Field(True, description="Record facts (schemas.facts) on every span")
    facts_key_file: Path | None = Field(
        None,
        description="The deployment's fact secret (64 hex characters); every collector of a "
        "deployment, and offline scoring, must read the same file. Default: facts.key in "
        "the spill directory, created on first start.",
    )


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
        self._group_offsets: GroupOffsets | None = None
        self.pipeline: IngestPipeline | None = None
        self._grpc = None
        self._http: OtlpHttpServer | None = None
        self._http_thread: threading.Thread | None = None

    def start(self) -> None:
        config = self.config
        facts = self._fact_maker()  # a bad key file stops the start before any connection
        try:
            producer = producer_for(config.kafka_bootstrap, config.ack_timeout_s)
        except KafkaError as exc:
            raise KafkaUnavailable(
                f"cannot reach Kafka at {config.kafka_bootstrap}: {exc}"
            ) from exc
        try:
            spill = SpillFile(config.spill_dir, config.spill_max_bytes)
        except SpillInUse as exc:
            producer.close(timeout=0)
            raise OSError(str(exc)) from exc
        if config.durable_log:
            self._group_offsets = GroupOffsets(
                config.kafka_bootstrap, config.log_groups, config.topic
            )
        self.publisher = KafkaPublisher(
            producer, spill, config.topic, config.ack_timeout_s,
            dead_letters=DeadLetterFile(config.spill_dir),
            renew=lambda: producer_for(config.kafka_bootstrap, config.ack_timeout_s),
            committed=self._group_offsets,
        )  # fmt: skip
        self.publisher.start()
        self.pipeline = IngestPipeline(
            Redactor(config.redaction, facts), self.publisher, config.max_message_bytes,
            self._counters,
        )  # fmt: skip
        try:
            self._http = OtlpHttpServer(
                (config.listen_host, config.http_port), self.pipeline, self.auth,
                config.max_body_bytes, config.ack_timeout_s, config.receiver_workers,
                config.idle_timeout_s, config.read_timeout_s,
            )  # fmt: skip
        except OSError as exc:
            self.publisher.close()
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
            self.publisher.close()
            raise OSError(f"{exc}; pass another --grpc-port") from exc
        self._http_thread = threading.Thread(
            target=self._http.serve_forever, name="otlp-http", daemon=True
        )
        self._http_thread.start()
        log.info("collector listening: grpc %d, http %d", self.grpc_port, self.http_port)

    def _fact_maker(self) -> FactMaker | None:
        """The facts stage, with the deployment's secret (None with facts off)."""
        config = self.config
        if not config.facts:
            return None
        secret = load_secret(config.facts_key_file, config.spill_dir)
        return FactMaker(secret, PiiScanner(config.redaction.extra_patterns))

    def counters(self) -> dict[str, int]:
        """Requests and spans since `start()`, the spill's bytes not yet in Kafka, the log's
        bytes not yet let go (with durable_log: not yet committed by its readers; else the
        same as the spill's), and the entries of the dead-letter file (from earlier runs
        too)."""
        assert self.pipeline is not None and self.publisher is not None
        return {
            **asdict(self.pipeline.counters),
            "spill_bytes": self.publisher.spill.pending_bytes(),
            "log_bytes": self.publisher.spill.held_bytes(),
            "dead_letter_messages": self.publisher.dead_letters.entries,
        }

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting, finish in-flight requests, flush to Kafka (or keep in spill)."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace_s).wait()
        if self.publisher is not None:
            self.publisher.close()
        if self._group_offsets is not None:
            self._group_offsets.close()
