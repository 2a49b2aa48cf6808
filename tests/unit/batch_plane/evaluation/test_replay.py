"""Replay: stored rows back to OTLP that re-stores identically, rate limiting, filters."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, TracesData
from pathgrade.batch_plane.evaluation.replay import publish_trace, replay_traces, traces_data
from pathgrade.batch_plane.store.client import ClientStore
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_rows
from pathgrade.batch_plane.store.trace_rows import (
    FilterError,
    check_filter,
    find_trace_ids,
    load_traces,
)
from pathgrade.content.otlp import decode_spans_message
from pathgrade.schemas.topics import RECEIVED_AT_HEADER, SPANS_TOPIC, TENANT_HEADER

from tests.support import store_fixture  # noqa: F401  (the module's chDB store, `store`)

TRACE = uuid.uuid4().bytes  # unique in the shared store


def kv(key: str, **value: Any) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def original_message(trace: bytes = TRACE) -> bytes:
    """A trace with typed attributes, an event, a link, an error status and two scopes."""
    root = Span(
        trace_id=trace, span_id=bytes.fromhex("b7ad6b7169203331"), name="invoke_agent a",
        kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=1_700_000_000_000_000_001,
        end_time_unix_nano=1_700_000_000_500_000_000,
        attributes=[kv("gen_ai.operation.name", string_value="invoke_agent"),
                    kv("pathgrade.replay.index", int_value=3),
                    kv("flag", bool_value=True), kv("ratio", double_value=0.5)],
        events=[Span.Event(time_unix_nano=1_700_000_000_100_000_007, name="note",
                           attributes=[kv("n", int_value=7)])],
    )  # fmt: skip
    chat = Span(
        trace_id=trace, span_id=bytes.fromhex("00f067aa0ba902b7"),
        parent_span_id=root.span_id, name="chat gpt-4o", kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_100_000,
        end_time_unix_nano=1_700_000_000_200_000_000,
        attributes=[kv("gen_ai.operation.name", string_value="chat"),
                    kv("gen_ai.usage.input_tokens", int_value=120)],
        links=[Span.Link(trace_id=bytes(16), span_id=bytes(range(8)), trace_state="k=v",
                         attributes=[kv("l", string_value="x")])],
        status={"code": 2, "message": "boom"},
    )  # fmt: skip
    resource = Resource(attributes=[kv("service.name", string_value="svc")])
    return TracesData(
        resource_spans=[
            ResourceSpans(
                resource=resource,
                scope_spans=[
                    ScopeSpans(scope={"name": "s1", "version": "1"}, spans=[root]),
                    ScopeSpans(scope={"name": "s2"}, spans=[chat]),
                ],
            )
        ]
    ).SerializeToString()


def stored_rows(message: bytes, tenant: str = "acme", received: int = 42) -> list[list[Any]]:
    return span_rows(decode_spans_message(message, tenant, received))


def test_a_replayed_trace_stores_exactly_the_rows_it_came_from(
    store: ClientStore,
) -> None:
    rows = stored_rows(original_message())
    store.insert("spans", rows, list(SPAN_COLUMNS))
    [trace] = load_traces(store, [TRACE.hex()])
    replayed = traces_data(trace).SerializeToString()
    assert sorted(stored_rows(replayed)) == sorted(rows)


def test_integer_columns_come_back_typed_and_other_values_as_their_text(
    store: ClientStore,
) -> None:
    [trace] = load_traces(store, [TRACE.hex()])
    spans = {
        s.name: s for s in decode_spans_message(traces_data(trace).SerializeToString(), "t", 1)
    }
    root, chat = spans["invoke_agent a"], spans["chat gpt-4o"]
    assert root.attributes["pathgrade.replay.index"] == 3 and root.eval.replay_index == 3
    assert chat.attributes["gen_ai.usage.input_tokens"] == 120 and chat.genai.input_tokens == 120
    assert root.attributes["flag"] == "true" and root.attributes["ratio"] == "0.5"
    assert (root.scope_name, chat.scope_name, chat.status_code) == ("s1", "s2", "Error")


class FakeProducer:
    """Records what would be sent (the broker itself is exercised by the integration test)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, list[tuple[str, bytes]], float]] = []
        self.now = 0.0

    def send(self, topic: str, value: bytes, key: bytes, headers: list[tuple[str, bytes]]) -> Any:
        self.sent.append((topic, value, key, headers, self.now))
        return self

    def get(self, timeout: float) -> None:
        return None

    def flush(self, timeout: float | None = None) -> None:
        return None


def test_replay_is_rate_limited_keyed_by_trace_and_keeps_tenant_and_receive_time(
    store: ClientStore,
) -> None:
    ids = []
    for n in range(1, 5):
        trace = uuid.uuid4().bytes
        store.insert(
            "spans", stored_rows(original_message(trace), received=1000 + n), list(SPAN_COLUMNS)
        )
        ids.append(trace.hex())
    producer = FakeProducer()

    def sleep(seconds: float) -> None:
        producer.now += seconds

    seen: list[tuple[int, int]] = []
    summary = replay_traces(
        store, producer, ids, rate_per_s=2, batch=3, progress=lambda d, t: seen.append((d, t)),
        clock=lambda: producer.now, sleep=sleep,
    )  # fmt: skip
    assert (summary.traces, summary.spans) == (4, 8)
    assert [s[4] for s in producer.sent] == [0.0, 0.5, 1.0, 1.5]
    assert [s[2].decode() for s in producer.sent] == ids
    assert {s[0] for s in producer.sent} == {SPANS_TOPIC}
    assert producer.sent[0][3] == [(TENANT_HEADER, b"acme"), (RECEIVED_AT_HEADER, b"1001")]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_find_trace_ids_runs_the_filter_and_refuses_statements(
    store: ClientStore,
) -> None:
    assert find_trace_ids(
        store, "SpanName = 'chat gpt-4o' AND TraceId = '" + TRACE.hex() + "'"
    ) == [TRACE.hex()]
    only_this = f"TraceId = '{TRACE.hex()}'"
    assert find_trace_ids(store, only_this, since_ns=1_700_000_000_000_000_000) == [TRACE.hex()]
    assert find_trace_ids(store, only_this, since_ns=1_800_000_000_000_000_000) == []
    with pytest.raises(FilterError, match="`;` is not allowed"):
        check_filter("1; DROP TABLE spans")
    with pytest.raises(FilterError, match="empty filter"):
        check_filter("  ")


class ReadonlyRecorder:
    """Passes queries to the store and records whether each asked to run read-only."""

    def __init__(self, inner: ClientStore) -> None:
        self.inner = inner
        self.readonly: list[bool] = []

    def query(self, sql: str, parameters: Any = None, readonly: bool = False) -> Any:
        self.readonly.append(readonly)
        return self.inner.query(sql, parameters, readonly=readonly)


def test_user_filters_and_trace_reads_run_read_only(store: ClientStore) -> None:
    recorder = ReadonlyRecorder(store)
    load_traces(recorder, find_trace_ids(recorder, "1 = 1", limit=2))  # type: ignore[arg-type]
    assert recorder.readonly == [True] * 4  # the trace ids, their days, spans and records


def test_publish_trace_sends_one_message_for_the_whole_trace(
    store: ClientStore,
) -> None:
    [trace] = load_traces(store, [TRACE.hex()])
    producer = FakeProducer()
    publish_trace(producer, trace)
    [(_, value, key, _, _)] = producer.sent
    assert key == TRACE.hex().encode()
    assert len(decode_spans_message(value, "acme", 0)) == 2
