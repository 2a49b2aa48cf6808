"""The store writer's settings, apart from the writer so the command line reads them without
importing kafka-python or the insert paths."""

from __future__ import annotations

from typing import Any

from pathgrade.schemas.topics import LOGS_TOPIC, SPANS_TOPIC, STORE_GROUP
from pathgrade.transport.message_auth import MESSAGE_KEY_HELP, MessageKeySetting
from pydantic import BaseModel, ConfigDict, Field

SQL_INSERT_MIN_SPANS = 20_000
"""`StoreWriterConfig.sql_insert_min_spans`'s default: above the 10,000-12,000 spans per insert
from which bench/store_insert.py measured the SQL path cheaper (docs/scale.md has the curve)."""


class StoreWriterConfig(BaseModel):
    """Where to read and how to batch."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str = Field(description="Kafka bootstrap servers, HOST:PORT[,HOST:PORT...]")
    topic: str = Field(SPANS_TOPIC, description="topic of spans read")
    logs_topic: str | None = Field(
        LOGS_TOPIC,
        description="topic of log records read (into the `logs` table; `null`: spans only)",
    )
    group_id: str = Field(STORE_GROUP, description="consumer group")
    max_batch_spans: int = Field(
        50_000, description="spans of one insert at most; a full batch is written at once"
    )
    max_batch_age_s: float = Field(
        2.0, description="a batch is written at the latest this long after its first span"
    )
    idle_flush_s: float = Field(
        0.25,
        description="a batch is written when no message came for this long and the "
        "previous insert is at least `max_batch_age_s` old",
    )
    sql_batch_age_s: float = Field(
        5.0,
        description="under load, a batch on its way to the SQL path (one that has, or at "
        "the rate its spans came will have by then, `sql_insert_min_spans` spans) is "
        "written at the latest this long after its first span instead of `max_batch_age_s`, "
        "so the SQL statement's fixed cost is shared by more spans",
    )
    sql_insert: bool = Field(
        True,
        description="let ClickHouse parse the values of large batches itself "
        "(`sql_insert_min_spans`); needs a `ClientStore`, the store writer's own",
    )
    sql_insert_min_spans: int = Field(
        SQL_INSERT_MIN_SPANS,
        ge=0,
        description="a batch of at least this many spans is inserted by ClickHouse's own "
        "Protobuf parsing (one INSERT through a view, whose analysis costs ~0.2-0.3 s of CPU), "
        "a smaller one decoded in Python; the default is where bench/store_insert.py "
        "measured the SQL path's CPU per span, analysis included, below the Python path's",
    )
    session_timeout_ms: int = Field(6000, description="consumer group session timeout")
    consumer_options: dict[str, Any] = Field(
        default_factory=dict, description="further kafka-python consumer settings"
    )
    message_key: MessageKeySetting = Field(None, description=MESSAGE_KEY_HELP)
