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

    kafka_bootstrap: str = Field(description="Kafka bootstrap servers, HOST:PORT[,HOST:PORT]")
    spill_dir: Path = Field(
        description="directory of the local spill file used while Kafka is unavailable "
        "(`--spill-dir`)"
    )
    listen_host: str = Field(
        "127.0.0.1",
        description="address both receivers bind (`0.0.0.0` to accept remote agents)",
    )
    grpc_port: int = Field(4317, ge=0, le=65535, description="OTLP/gRPC port (`0`: any free port)")
    http_port: int = Field(4318, ge=0, le=65535, description="OTLP/HTTP port (`0`: any free port)")
    max_body_bytes: int = Field(
        DEFAULT_MAX_BODY_BYTES, gt=0,
        description="largest request after decompression: HTTP 413 / gRPC "
        "`RESOURCE_EXHAUSTED` beyond it; gzip bombs are never inflated past it",
    )  # fmt: skip
    max_message_bytes: int = Field(
        DEFAULT_MAX_MESSAGE_BYTES, gt=0, le=MAX_MESSAGE_BYTES_LIMIT,
        description="largest Kafka message: a trace larger than this is split over several "
        "messages (still one trace each), and a span that cannot fit in one message of its "
        "own (with its resource and scope, after redaction) is refused; keep it below the "
        "broker's `message.max.bytes` (at most 16 MiB − 64 KiB, the producer's request size)",
    )  # fmt: skip
    spill_max_bytes: int = Field(
        DEFAULT_SPILL_BYTES, gt=0,
        description="bound of the local spill file used while Kafka is unavailable; when "
        "full: HTTP 503 + `Retry-After` / gRPC `UNAVAILABLE` with `RetryInfo`",
    )  # fmt: skip
    ack_timeout_s: float = Field(
        5.0, gt=0, le=8.0,
        description="how long a request waits for Kafka's acknowledgement before its spans "
        "go to the spill (at most 8; a request is answered within this plus 1 s and its own "
        "processing, under the exporters' default 10 s timeout, whatever the broker does)",
    )  # fmt: skip
    receiver_workers: int = Field(
        DEFAULT_WORKERS, gt=0, le=1024,
        description="request threads of each receiver (OTLP/HTTP and gRPC); connections "
        "hold no thread while idle",
    )  # fmt: skip
    idle_timeout_s: float = Field(
        DEFAULT_IDLE_TIMEOUT_S, gt=0,
        description="a connection that sends nothing for this long is closed (both receivers)",
    )  # fmt: skip
    read_timeout_s: float = Field(
        DEFAULT_READ_TIMEOUT_S, gt=0,
        description="OTLP/HTTP: a request whose head or body stops coming for this long is "
        "answered 408",
    )  # fmt: skip
    tokens_file: Path | None = Field(
        None,
        description="YAML `token: tenant` map; with it, a missing or unknown bearer token "
        "gets 401 / `UNAUTHENTICATED`; without it every request is tenant `default`. A span "
        "attribute never sets the tenant",
    )
    durable_log: bool = Field(
        False,
        description="acknowledge once on local disk: every accepted message is appended to the "
        "spill (fsynced) and kept there until the `log_groups` committed it, so a broker that "
        "keeps nothing on disk loses nothing acknowledged (`pathgrade up` without `--kafka` "
        "turns it on)",
    )
    log_groups: list[str] = Field(
        default_factory=lambda: [STORE_GROUP, REALTIME_GROUP],
        min_length=1,
        description="with `durable_log`: the consumer groups of `topic` that must commit a "
        "message before the log lets it go",
    )
    topic: str = Field(SPANS_TOPIC, description="Kafka topic")
    redaction: RedactionConfig = Field(
        default_factory=RedactionConfig, description="what content the collector lets through"
    )
    facts: bool = Field(
        True, description="record facts on every span before dropping content (`schemas/facts.py`)"
    )
    facts_key_file: Path | None = Field(
        None,
        description="the deployment's fact key (64 hex characters); default: `facts.key` in "
        "the spill directory, created there on first start. Every collector of a deployment "
        "and offline scoring (`pathgrade eval --facts-key-file`, `$PATHGRADE_FACTS_KEY_FILE`) "
        "must read the same file; `pathgrade up` keeps it in its data directory. Give "
        "replicas one shared file (a Kubernetes Secret): a fingerprint names its key, and "
        "fingerprints of different keys are never compared",
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
