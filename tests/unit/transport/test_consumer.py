"""Decode-and-skip of the shared consumer: a message that is no OTLP is logged with where
it sits, counted and skipped; a good one yields its spans; a header that cannot be read
is counted and the spans kept; with the stack's message key, a message it did not sign is
refused and counted, one it signed is read."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from kafka import TopicPartition
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from pathgrade.schemas.topics import MAC_HEADER, RECEIVED_AT_HEADER, TENANT_HEADER
from pathgrade.transport.consumer import decode_spans
from pathgrade.transport.message_auth import MessageKey

PARTITION = TopicPartition("pathgrade.spans", 3)


@dataclass
class Counts:
    undecodable_messages: int = 0
    partly_decoded_spans: int = 0
    unreadable_headers: int = 0
    forged_messages: int = 0


def traces_data() -> bytes:
    data = TracesData()
    span = data.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "invoke_agent a"
    span.start_time_unix_nano, span.end_time_unix_nano = 10, 20
    return data.SerializeToString()


def message(
    value: bytes, headers: list[tuple[str, bytes]], key: bytes = b"01" * 16
) -> SimpleNamespace:
    return SimpleNamespace(key=key, value=value, headers=headers, offset=41, timestamp=1_000)


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


def test_with_the_stacks_key_only_what_it_signed_is_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stack, other = MessageKey.generate(), MessageKey.generate()
    headers = [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"5")]
    value = traces_data()
    signed = stack.signed(PARTITION.topic, b"01" * 16, value, headers)
    counts = Counts()
    (span,) = decode_spans(PARTITION, message(value, signed), counts, stack)
    assert span.tenant == "acme" and counts == Counts()
    forged = [
        headers,  # no MAC
        other.signed(PARTITION.topic, b"01" * 16, value, headers),  # another stack's key
        [(TENANT_HEADER, b"globex"), *signed[1:]],  # the tenant changed after signing
        [*signed, signed[-1]],  # two MACs
        [*headers, (MAC_HEADER, b"")],
    ]
    with caplog.at_level(logging.WARNING):
        for forged_headers in forged:
            assert decode_spans(PARTITION, message(value, forged_headers), counts, stack) == []
    assert counts == Counts(forged_messages=len(forged))
    assert "without the stack's MAC at pathgrade.spans[3] offset 41" in caplog.text
    unsigned = Counts()
    assert len(decode_spans(PARTITION, message(value, headers), unsigned)) == 1  # no key
