"""The collector's settings, apart from the service so the command line reads them without
importing kafka-python or grpcio."""

from __future__ import annotations

from pathlib import Path

from pathgrade.collector.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MIN_BODY_RATE,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_WORKERS,
    MAX_MESSAGE_BYTES_LIMIT,
)
from pathgrade.collector.redaction_config import RedactionConfig
from pathgrade.collector.spill import DEFAULT_SPILL_BYTES
from pathgrade.content.predicates import RequestPatterns
from pathgrade.schemas.topics import LOGS_TOPIC, REALTIME_GROUP, SPANS_TOPIC, STORE_GROUP
from pathgrade.transport.message_auth import MESSAGE_KEY_HELP, MessageKeySetting
from pydantic import BaseModel, ConfigDict, Field


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
        "hold no thread while idle, nor (OTLP/HTTP) while their request arrives",
    )  # fmt: skip
    idle_timeout_s: float = Field(
        DEFAULT_IDLE_TIMEOUT_S, gt=0,
        description="a connection that sends nothing for this long is closed (both receivers)",
    )  # fmt: skip
    read_timeout_s: float = Field(
        DEFAULT_READ_TIMEOUT_S, gt=0,
        description="OTLP/HTTP: a request head not whole this long after its first byte, "
        "or a body that stops coming for this long, is answered 408",
    )  # fmt: skip
    min_body_rate: int = Field(
        DEFAULT_MIN_BODY_RATE, gt=0,
        description="OTLP/HTTP: slowest a body may arrive, in bytes/s: every "
        "`read_timeout_s` it must bring `min_body_rate` x `read_timeout_s` bytes or the rest "
        "of it (408 otherwise), so a client that drips bytes is cut within `read_timeout_s`",
    )  # fmt: skip
    max_connections: int = Field(
        DEFAULT_MAX_CONNECTIONS, gt=0,
        description="OTLP/HTTP: open connections at most (fewer when the process may not "
        "open that many files); past it the longest-idle one is closed to admit a new one, "
        "else the one whose request has been arriving longest",
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
        description="with `durable_log`: the consumer groups of `topic` (and `logs_topic`) "
        "that must commit a message before the log lets it go",
    )
    topic: str = Field(SPANS_TOPIC, description="Kafka topic of spans")
    logs_topic: str = Field(
        LOGS_TOPIC,
        description="Kafka topic of log records (GenAI events as records); as many partitions "
        "as `topic` (`pathgrade topics` creates it so)",
    )
    redaction: RedactionConfig = Field(
        default_factory=RedactionConfig, description="what content the collector lets through"
    )
    facts: bool = Field(
        True, description="record facts on every span before dropping content (`schemas/facts.py`)"
    )
    facts_key_file: Path | None = Field(
        None,
        description="the deployment's fact key (64 hex characters; it also keys the fingerprints "
        "of withheld values and identifiers, facts on or off); default: `facts.key` in "
        "the spill directory, created there on first start. Every collector of a deployment "
        "and offline scoring (`pathgrade eval --facts-key-file`, `$PATHGRADE_FACTS_KEY_FILE`) "
        "must read the same file; `pathgrade up` keeps it in its data directory. Give "
        "replicas one shared file (a Kubernetes Secret): a fingerprint names its key, and "
        "fingerprints of different keys are never compared",
    )
    message_key: MessageKeySetting = Field(None, description=MESSAGE_KEY_HELP)
    policy: Path | None = Field(
        None,
        description="the detector policy YAML the realtime plane reads (docs/detectors.md): "
        "the collector takes its `requests` (what users' requests for each write look like) "
        "and records which writes each turn's request asked for "
        "(`pathgrade.facts.requests`); give the collector and the realtime plane the same "
        "file (docs/collector.md)",
    )


def load_request_patterns(path: Path | None) -> RequestPatterns:
    """The `requests` of every section of the policy file at `path` (none without a file);
    ValueError names the file and the field of a bad one."""
    import yaml  # the policy file's reader: not needed to read the settings' definitions

    if path is None:
        return RequestPatterns({})
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ValueError(f"policy {path}: {error}") from error
    if not isinstance(document, dict):
        raise ValueError(f"policy {path}: expected a mapping")
    try:
        return RequestPatterns.of_policy(document)
    except ValueError as error:
        raise ValueError(f"policy {path}: {error}") from error
