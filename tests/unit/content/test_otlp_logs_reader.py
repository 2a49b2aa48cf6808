"""The OTLP reader's log records (`read_logs`, content/_otlp_reader.c) decode as upb and
the Python walk do.

Each test decodes the same `pathgrade.logs` value twice, through the reader
(`otlp_logs.decode_logs_message`) and through the Python path (upb's parse, then
`otlp_logs.decode_logs_data`), and compares the records field by field with types kept
(`test_otlp_reader._exact`). Where the reader leaves a value to upb (None) the test says
so, and what the Python path does with it (decode, or raise ValueError) stands. Inputs:
bench/ingest.py's `realistic-logs` records, generated LogsData, the same with random bytes
changed, every truncation of a record, and hand-written wire edge cases.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, LogsData, ResourceLogs, ScopeLogs
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from pathgrade.content import otlp_logs
from pathgrade.content.otlp import read_logs
from pathgrade.schemas.model import LogRecord as CanonicalRecord

from tests.support.benches import load_bench
from tests.support.examples import examples
from tests.unit.content.test_otlp_reader import (
    SPAN_ID,
    TRACE_ID,
    _exact,
    _kv,
    enums,
    ids,
    key_values,
    texts,
    times,
    values,
)


def _by_python(value: bytes) -> list[CanonicalRecord]:
    return otlp_logs.decode_logs_data(otlp_logs.parse_logs_message(value), "acme", 7)


def _assert_same(value: bytes) -> list[CanonicalRecord]:
    """The reader reads `value` as upb does and decodes it as the Python path does; its
    records."""
    assert read_logs(value) is not None, "the reader left a value to upb"
    return _assert_as_upb(value)


def _assert_as_upb(value: bytes) -> list[CanonicalRecord]:
    """`decode_logs_message` gives what the Python path gives (and raises where it
    raises); the reader reads `value`, or leaves it to upb."""
    try:
        expected = _by_python(value)
    except ValueError:
        assert read_logs(value) is None, "the reader read bytes upb rejects"
        with pytest.raises(ValueError):
            otlp_logs.decode_logs_message(value, "acme", 7)
        return []
    got = otlp_logs.decode_logs_message(value, "acme", 7)
    assert _exact(got) == _exact(expected)
    return got


def test_the_reader_is_built_and_used() -> None:
    data = LogsData()
    data.resource_logs.add().scope_logs.add().log_records.add(trace_id=TRACE_ID)
    with patch.object(otlp_logs, "decode_logs_data", side_effect=AssertionError("upb path")):
        assert otlp_logs.decode_logs_message(data.SerializeToString(), "acme", 7)


def test_the_realistic_logs_mix_of_bench_ingest_decodes_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest = load_bench("ingest", monkeypatch)
    bodies = [ingest.messages_as_records(b)[1] for b in ingest.realistic_bodies(1500, 256)]
    records = [r for body in bodies for r in _assert_same(body)]
    assert len(records) > 100
    assert all(isinstance(r.attributes["gen_ai.input.messages"], list) for r in records)


def test_records_of_several_resources_and_scopes_keep_their_own() -> None:
    data = LogsData()
    for n in range(3):
        resource = data.resource_logs.add()
        resource.resource.attributes.append(_kv("service.name", AnyValue(string_value=f"s{n}")))
        for m in range(2):
            scope = resource.scope_logs.add(scope=InstrumentationScope(name=f"x{m}", version="2"))
            scope.log_records.add(trace_id=TRACE_ID, span_id=SPAN_ID, event_name="e")
    records = _assert_same(data.SerializeToString())
    assert [r.service_name for r in records] == ["s0"] * 2 + ["s1"] * 2 + ["s2"] * 2
    assert records[0].resource_attributes is records[1].resource_attributes
    assert [r.scope_name for r in records[:2]] == ["x0", "x1"]


def test_the_event_name_falls_back_to_its_attribute_as_text() -> None:
    data = LogsData()
    records = data.resource_logs.add().scope_logs.add().log_records
    records.add(attributes=[_kv("event.name", AnyValue(string_value="old"))])
    records.add(attributes=[_kv("event.name", AnyValue(int_value=3))])
    records.add(event_name="new", attributes=[_kv("event.name", AnyValue(string_value="old"))])
    got = _assert_same(data.SerializeToString())
    assert [r.event_name for r in got] == ["old", "3", "new"]


def test_wire_edge_cases_read_as_upb_or_left_to_it() -> None:
    record = LogRecord(trace_id=TRACE_ID, body=AnyValue(string_value="b")).SerializeToString()
    body_twice = record + b"\x2a\x03\x0a\x01c"  # upb merges the two bodies: left to it
    empty_body = LogRecord(body=AnyValue()).SerializeToString()  # present, no value: None
    unknown = record + b"\xa8\x06\x05"  # field 101, a varint: skipped
    for raw, read in ((body_twice, False), (empty_body, True), (unknown, True)):
        value = b"\x0a" + _frame(b"\x12" + _frame(b"\x12" + _frame(raw)))
        assert (read_logs(value) is not None) is read
        _assert_as_upb(value)
    assert read_logs("not bytes") is None  # type: ignore[arg-type]


def _frame(payload: bytes) -> bytes:
    """A length-delimited field's length (a varint) and payload."""
    size, length = len(payload), b""
    while size > 0x7F:
        length += bytes([size & 0x7F | 0x80])
        size >>= 7
    return length + bytes([size]) + payload


# --------------------------------------------------------------------------- generated

records = st.builds(
    lambda body, **fields: LogRecord(**fields, **({} if body is None else {"body": body})),
    body=st.none() | values, time_unix_nano=times, observed_time_unix_nano=times,
    severity_number=enums, severity_text=texts, attributes=key_values,
    dropped_attributes_count=st.integers(0, 3), flags=st.integers(0, 2**32 - 1), trace_id=ids,
    span_id=ids, event_name=texts,
)  # fmt: skip
scope_logs = st.builds(
    lambda scope, **fields: ScopeLogs(**fields, **({} if scope is None else {"scope": scope})),
    scope=st.none() | st.builds(InstrumentationScope, name=texts, version=texts,
                                attributes=key_values),
    log_records=st.lists(records, max_size=3), schema_url=texts,
)  # fmt: skip
resource_logs = st.builds(
    lambda resource, **fields: ResourceLogs(
        **fields, **({} if resource is None else {"resource": resource})
    ),
    resource=st.none() | st.builds(Resource, attributes=key_values),
    scope_logs=st.lists(scope_logs, max_size=3), schema_url=texts,
)  # fmt: skip
logs = st.builds(LogsData, resource_logs=st.lists(resource_logs, max_size=3))


@settings(
    max_examples=examples(100),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=logs)
def test_generated_logs_decode_the_same(data: LogsData) -> None:
    """Every generated LogsData is read by the reader (no decline), as upb reads it."""
    _assert_same(data.SerializeToString())


@settings(
    max_examples=examples(100),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    data=logs, change=st.sampled_from(["truncate", "replace", "insert"]), at=st.floats(0, 1),
    new=st.binary(min_size=1, max_size=4),
)  # fmt: skip
def test_changed_logs_decode_as_upb_or_are_left_to_it(
    data: LogsData, change: str, at: float, new: bytes
) -> None:
    whole = data.SerializeToString()
    n = int(at * len(whole))
    _assert_as_upb(
        {"truncate": whole[:n], "replace": whole[:n] + new + whole[n + len(new) :],
         "insert": whole[:n] + new + whole[n:]}[change]
    )  # fmt: skip


def test_every_truncation_of_a_record_reads_as_upb_or_is_left_to_it() -> None:
    record = LogRecord(
        time_unix_nano=2**63 + 5, observed_time_unix_nano=9, severity_number=-3,
        severity_text="WARN é", body=AnyValue(string_value="a body"),
        attributes=[_kv("k", AnyValue(int_value=-1)), _kv("k", AnyValue(bool_value=True))],
        flags=2**32 - 1, trace_id=TRACE_ID, span_id=SPAN_ID, event_name="gen_ai.choice",
    )  # fmt: skip
    data = LogsData()
    data.resource_logs.add().scope_logs.add().log_records.append(record)
    whole = data.SerializeToString()
    got = _assert_same(whole)
    assert got[0].attributes == {"k": True} and got[0].severity_number == -3
    left: list[Any] = []
    for n in range(len(whole)):
        _assert_as_upb(whole[:n])
        left += [n] if read_logs(whole[:n]) is None else []
    assert left  # truncated inside a field: left to upb, which rejects it


def test_without_the_reader_every_value_is_parsed_by_upb() -> None:
    data = LogsData()
    data.resource_logs.add().scope_logs.add().log_records.add(trace_id=TRACE_ID, event_name="e")
    with patch.object(otlp_logs, "read_logs", None):
        got = otlp_logs.decode_logs_message(data.SerializeToString(), "acme", 7)
    assert _exact(got) == _exact(_by_python(data.SerializeToString()))
