"""Decode-and-skip of the shared consumer: a message that is no OTLP is logged with where
it sits, counted and skipped; a good one yields its spans; a header that cannot be read
is counted and the spans kept."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from kafka import TopicPartition
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, TENANT_HEADER
from pathgrade.transport.consumer import decode_spans

PARTITION = TopicPartition("pathgrade.spans", 3)


@dataclass
class Counts:
    undecodable_messages: int = 0
    partly_decoded_spans: int = 0
    unreadable_headers: int = 0


def traces_data() -> bytes:
    data = TracesData()
    span = data.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "invoke_agent a"
    span.start_time_unix_nano, span.end_time_unix_nano = 10, 20
    return data.SerializeToString()


def message(value: bytes, headers: list[tuple[str, bytes]]) -> SimpleNamespace:
    return SimpleNamespace(value=value, headers=headers, offset=41, timestamp=1_000)


def test_an_undecodable_message_is_logged_counted_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counts = Counts()
    with caplog.at_level(logging.ERROR):
        assert decode_spans(PARTITION, message(b"\xff not otlp", []), counts) == []
    assert counts == Counts(undecodable_messages=1)
    assert "pathgrade.spans[3] offset 41" in caplog.text


def test_a_good_message_yields_its_spans_and_counts_an_unreadable_header() -> None:
    counts = Counts()
    headers = [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"not a number")]
    (span,) = decode_spans(PARTITION, message(traces_data(), headers), counts)
    assert (span.tenant, span.name) == ("acme", "invoke_agent a")
    assert counts == Counts(unreadable_headers=1)
