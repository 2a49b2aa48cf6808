"""The OTLP reader (content/_otlp_reader.c) decodes as upb and the Python walk do.

Each test decodes the same `pathgrade.spans` value twice, through the reader
(`read_traces`, then `otlp._decode_read`) and through the Python path (upb's parse, then
`otlp.decode_resource_spans`), and compares the spans field by field: types kept (True is
not 1), floats by their bits, dict order, which spans share a resource's dict. Where the
reader leaves a value to upb (None) the test says so, and what the Python path does with it
(decode, or raise ValueError) stands. Inputs: the demo traffic of the three conventions,
bench/ingest.py's realistic mix, generated TracesData, generated spans and values with
fields of any number and wire type added, the same with random bytes changed, every
truncation of a value and of a span, and hand-written wire edge cases.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status, TracesData
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content import otlp
from pathgrade.content.otlp import DecodeProblems, read_traces
from pathgrade.schemas import genai
from pathgrade.schemas.model import Span

from pathgrade.demo.sender import send_demo_traces
from tests.support.benches import load_bench
from tests.support.examples import examples
from tests.support.parity import Parity

TRACE_ID = bytes.fromhex("5b8efff798038103d269b633813fc60c")
SPAN_ID = bytes.fromhex("00f067aa0ba902b7")


# --------------------------------------------------------------------------- comparing


def _exact(value: Any) -> Any:
    """`value` in a form whose == is exact: types kept, floats by their bits (NaN equals
    itself, -0.0 is not 0.0), dict order kept, dataclasses field by field."""
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        return (type(value).__name__, *((f.name, _exact(getattr(value, f.name))) for f in fields))
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, dict):
        return ("dict", *((_exact(k), _exact(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, *map(_exact, value))
    return (type(value).__name__, value)


def _sharing(spans: list[Span]) -> list[int]:
    """For each span, the first span holding the same resource attributes dict."""
    firsts: dict[int, int] = {}
    return [firsts.setdefault(id(s.resource_attributes), n) for n, s in enumerate(spans)]


def _by_reader(value: bytes) -> tuple[list[Span], DecodeProblems] | None:
    problems = DecodeProblems()
    read = read_traces(value)
    return None if read is None else (otlp._decode_read(read, "acme", 7, problems), problems)


def _by_python(value: bytes) -> tuple[list[Span], DecodeProblems]:
    problems = DecodeProblems()
    traces = otlp.parse_spans_message(value)
    return otlp.decode_resource_spans(traces.resource_spans, "acme", 7, problems), problems


def _parts_by_upb(value: bytes) -> list[tuple]:
    """What `read_traces` returns for `value`, from upb's parse (the kind and status code
    as upb reads them: the spans map numbers outside the enums to one string)."""
    attributes = otlp.attributes_dict
    resources = []
    for rs in otlp.parse_spans_message(value).resource_spans:
        scopes = []
        for ss in rs.scope_spans:
            spans = [
                (s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(), s.name, s.kind,
                 s.start_time_unix_nano, s.end_time_unix_nano, s.trace_state,
                 attributes(s.attributes), s.status.code, s.status.message,
                 [(e.time_unix_nano, e.name, attributes(e.attributes)) for e in s.events] or None,
                 [(k.trace_id.hex(), k.span_id.hex(), k.trace_state, attributes(k.attributes))
                  for k in s.links] or None, s.flags)
                for s in ss.spans
            ]  # fmt: skip
            scopes.append((ss.scope.name, ss.scope.version, spans))
        resources.append((attributes(rs.resource.attributes), scopes))
    return resources


def _assert_same(value: bytes) -> list[Span]:
    """The reader reads `value` as upb does and decodes it as the Python path does, field
    by field (`tests.support.parity`); its spans."""
    parity: Parity[bytes, list[Span]] = Parity("OTLP reader / upb")
    parity.check([value], lambda v: otlp.read_spans_message(v, "acme", 7),
                 lambda v: _by_python(v)[0])  # fmt: skip
    parity.assert_holds()
    by_reader = _by_reader(value)
    assert by_reader is not None, "the reader left a value to upb"
    try:
        parts = _parts_by_upb(value)
    except ValueError as error:
        pytest.fail(f"the reader read bytes upb rejects: {error}")
    assert _exact(read_traces(value)) == _exact(parts)
    (spans, problems), (expected, expected_problems) = by_reader, _by_python(value)
    assert [_exact(s) for s in spans] == [_exact(s) for s in expected]
    assert _sharing(spans) == _sharing(expected)
    assert problems == expected_problems
    return spans


def _assert_left_to_upb(value: bytes) -> list[Span] | None:
    """The reader leaves `value` to upb; the Python path's spans, or None when it raises."""
    assert read_traces(value) is None
    assert otlp.read_spans_message(value, "acme", 7) is otlp.LEFT_TO_UPB
    try:
        return _by_python(value)[0]
    except ValueError:
        return None


def test_the_reader_is_built_and_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without the extension parses every message with upb, slower: this
    checkout's must have it (pip install -e . with a C compiler)."""
    assert read_traces is not None, "pathgrade.content._otlp_reader is not built"

    def no_upb(value: bytes) -> TracesData:
        raise AssertionError("parsed by upb")

    monkeypatch.setattr(otlp, "parse_spans_message", no_upb)
    (span,) = otlp.decode_spans_message(_value(_span_bytes()), "t", 1)
    assert span.name == "chat gpt-4o"


def test_removing_either_side_fails_the_parity_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the reader every value is declined (counted by reason) and the parity check
    fails; without upb's path the slow side cannot answer and it fails too."""
    value = _demo_values("genai")[0]
    with monkeypatch.context() as patched:
        patched.setattr(otlp, "read_traces", None)
        with pytest.raises(AssertionError, match=r"decided 0 items .*reader is not built.: 1"):
            _assert_same(value)

    def no_upb(value: bytes) -> TracesData:
        raise NotImplementedError("upb's path removed")

    monkeypatch.setattr(otlp, "parse_spans_message", no_upb)
    with pytest.raises(NotImplementedError):
        _assert_same(value)


def test_without_the_extension_messages_decode_through_upb(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = _demo_values("genai")[0]
    with_reader = otlp.decode_spans_message(value, "t", 1)
    monkeypatch.setattr(otlp, "read_traces", None)
    parsed = []
    parse = otlp.parse_spans_message
    monkeypatch.setattr(otlp, "parse_spans_message", lambda v: parsed.append(v) or parse(v))
    without = otlp.decode_spans_message(value, "t", 1)
    assert parsed == [value] and len(without) > 10
    assert [_exact(s) for s in without] == [_exact(s) for s in with_reader]
    with pytest.raises(ValueError, match=r"pathgrade\.spans message value"):
        otlp.decode_spans_message(b"\x0a\x05ab", "t", 1)


def test_strings_and_ids_read_again_or_evicted_read_as_upb_reads_them() -> None:
    """The reader keeps the short strings (4,096 slots) and ids (1,024) it read for the
    spans that repeat them: a key, value, name or id read again, and more than the slots
    hold (6,500 strings, 4,500 ids: some must evict others), read as upb reads them, in one
    value and the next."""
    spans = [
        ProtoSpan(
            trace_id=TRACE_ID, span_id=n.to_bytes(8, "big"),
            parent_span_id=(n // 2).to_bytes(8, "big"), name=f"op {n % 7}",
            attributes=[
                KeyValue(key=f"key.{n}", value=AnyValue(string_value=f"v{n % 2000}")),
                KeyValue(key="http.request.method", value=AnyValue(string_value="GET")),
                KeyValue(key="k", value=AnyValue(string_value="é" * (n % 3))),
            ],
        )
        for n in range(1, 4_501)
    ]  # fmt: skip
    value = TracesData(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()
    first = _assert_same(value)
    again = _assert_same(value)
    assert [s.attributes for s in again] == [s.attributes for s in first]
    assert {s.span_id for s in again} == {n.to_bytes(8, "big").hex() for n in range(1, 4_501)}


def test_raw_content_read_by_read_value_is_kept_by_no_table() -> None:
    """The collector reads raw content with `read_value`: its strings are made afresh,
    never the ones a table keeps for read_traces (nor kept for the next call)."""
    text = "call me at 555-0100"
    span = ProtoSpan(trace_id=TRACE_ID, span_id=SPAN_ID, name="n", attributes=[
        KeyValue(key="k", value=AnyValue(string_value=text))])  # fmt: skip
    traces = TracesData(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])])
    value = traces.SerializeToString()
    from_traces = [_by_reader(value)[0][0].attributes["k"] for _ in range(2)]  # type: ignore[index]
    assert from_traces[0] is from_traces[1]  # the table's
    raw = AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=text)]))
    read = [otlp.read_value(raw.SerializeToString())[0][0] for _ in range(2)]  # type: ignore[index]
    assert read == [text, text]
    assert read[0] is not read[1]
    assert all(r is not from_traces[0] for r in read)


def test_a_value_left_to_upb_is_decoded_by_it() -> None:
    twice = _value(_span_bytes() + _len(15, _vint(3, 2)))  # a second status: merged
    (span,) = otlp.decode_spans_message(twice, "t", 1)
    assert read_traces(twice) is None
    assert (span.status_code, span.status_message) == ("Error", "boom")
    with pytest.raises(ValueError, match=r"pathgrade\.spans message value"):
        otlp.decode_spans_message(_value(_span_bytes() + _len(5, b"\xff")), "t", 1)


# --------------------------------------------------------------------------- real traffic


def _demo_values(flavor: str) -> list[bytes]:
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=40, seed=9, flavor=flavor)
    spans = list(exporter.get_finished_spans())
    return [encode_spans(spans[i : i + 64]).SerializeToString() for i in range(0, len(spans), 64)]


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_decodes_the_same_in_every_convention(flavor: str) -> None:
    spans = [s for value in _demo_values(flavor) for s in _assert_same(value)]
    assert len(spans) > 100
    assert any(s.genai.operation for s in spans)


def test_the_realistic_mix_of_bench_ingest_decodes_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest = load_bench("ingest", monkeypatch)
    values = ingest.realistic_bodies(1500, 256)
    assert sum(len(_assert_same(value)) for value in values) > 1000


def test_spans_of_several_resources_and_scopes_keep_their_own() -> None:
    data = TracesData()
    for n in range(3):
        rs = data.resource_spans.add()
        rs.resource.attributes.append(_kv("service.name", AnyValue(int_value=n)))
        for m in range(2):
            ss = rs.scope_spans.add(scope=InstrumentationScope(name=f"s{m}", version="1"))
            ss.spans.add(trace_id=TRACE_ID, span_id=bytes([n, m]), name="x")
            ss.spans.add(trace_id=TRACE_ID, span_id=bytes([n, m, 1]), name="y")
    request = ExportTraceServiceRequest(resource_spans=data.resource_spans)
    spans = _assert_same(request.SerializeToString())
    assert [s.service_name for s in spans] == ["0"] * 4 + ["1"] * 4 + ["2"] * 4
    assert _sharing(spans) == [0] * 4 + [4] * 4 + [8] * 4
    assert [s.scope_name for s in spans[:4]] == ["s0", "s0", "s1", "s1"]


# --------------------------------------------------------------------------- generated


def _kv(key: str, value: AnyValue | None) -> KeyValue:
    return KeyValue(key=key) if value is None else KeyValue(key=key, value=value)


def _array(values: list[AnyValue]) -> AnyValue:
    return AnyValue(array_value=ArrayValue(values=values))


def _kvlist(pairs: list[tuple[str, AnyValue | None]]) -> AnyValue:
    return AnyValue(kvlist_value=KeyValueList(values=[_kv(k, v) for k, v in pairs]))


texts = st.one_of(st.sampled_from(["", "x", "gpt-4o", "Résumé ǅ", "\x00", "a b"]), st.text())
KEYS = [
    "k", "", "service.name", "error.type", "pathgrade.run.id", "pathgrade.replay.index",
    genai.OPERATION_NAME, genai.REQUEST_MODEL, genai.USAGE_INPUT_TOKENS, genai.CONVERSATION_ID,
]  # fmt: skip
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))  # KEYS repeat in one span
scalars = st.one_of(
    texts.map(lambda t: AnyValue(string_value=t)),  # "" too: a present empty string
    st.booleans().map(lambda b: AnyValue(bool_value=b)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: AnyValue(int_value=i)),
    st.sampled_from([0, -1, 2**63 - 1, -(2**63)]).map(lambda i: AnyValue(int_value=i)),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: AnyValue(double_value=f)),
    st.binary(max_size=12).map(lambda b: AnyValue(bytes_value=b)),
    st.just(AnyValue()),  # nothing set
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(_array),
        st.lists(st.tuples(keys, inner | st.none()), max_size=4).map(_kvlist),
    ),
    max_leaves=12,
)
key_values = st.lists(st.builds(_kv, keys, values | st.none()), max_size=6)
ids = st.one_of(st.just(b""), st.binary(min_size=8, max_size=8), st.binary(max_size=20))
enums = st.one_of(st.integers(0, 6), st.integers(-(2**31), 2**31 - 1))
times = st.integers(0, 2**64 - 1)
events = st.builds(
    ProtoSpan.Event, time_unix_nano=times, name=texts, attributes=key_values,
    dropped_attributes_count=st.integers(0, 3),
)  # fmt: skip
links = st.builds(
    ProtoSpan.Link, trace_id=ids, span_id=ids, trace_state=texts, attributes=key_values,
    flags=st.integers(0, 2**32 - 1),
)  # fmt: skip
names = st.one_of(
    st.sampled_from(["chat gpt-4o", "execute_tool refund", "invoke_agent Support", "POST", ""]),
    texts,
)
statuses = st.one_of(st.none(), st.builds(Status, code=enums, message=texts))
spans = st.builds(
    lambda status, **fields: ProtoSpan(**fields, **({} if status is None else {"status": status})),
    status=statuses, trace_id=ids, span_id=ids, parent_span_id=ids, name=names, kind=enums,
    start_time_unix_nano=times, end_time_unix_nano=times, trace_state=texts,
    attributes=key_values, events=st.lists(events, max_size=2), links=st.lists(links, max_size=2),
    dropped_attributes_count=st.integers(0, 2), flags=st.integers(0, 2**32 - 1),
)  # fmt: skip
scopes = st.one_of(
    st.none(), st.builds(InstrumentationScope, name=texts, version=texts, attributes=key_values)
)
scope_spans = st.builds(
    lambda scope, **fields: ScopeSpans(**fields, **({} if scope is None else {"scope": scope})),
    scope=scopes, spans=st.lists(spans, max_size=3), schema_url=texts,
)  # fmt: skip
resources = st.one_of(st.none(), st.builds(Resource, attributes=key_values))
resource_spans = st.builds(
    lambda resource, **fields: ResourceSpans(
        **fields, **({} if resource is None else {"resource": resource})
    ),
    resource=resources, scope_spans=st.lists(scope_spans, max_size=3), schema_url=texts,
)  # fmt: skip
traces = st.builds(TracesData, resource_spans=st.lists(resource_spans, max_size=3))


@settings(
    max_examples=examples(150),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=traces)
def test_generated_traces_decode_the_same(data: TracesData) -> None:
    _assert_same(data.SerializeToString())


@settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    message=st.one_of(spans, traces),
    change=st.sampled_from(["truncate", "replace", "insert"]),
    at=st.floats(0, 1),
    new=st.binary(min_size=1, max_size=4),
)
def test_changed_bytes_decode_the_same_or_are_left_to_upb(
    message: ProtoSpan | TracesData, change: str, at: float, new: bytes
) -> None:
    """Random bytes in a message value, or in a span of one (the lengths around it
    adjusted, so the change lands in its nested fields): whatever the reader reads it
    reads as upb does and decodes as the Python path does (which raises on bytes upb
    rejects, failing the test)."""
    whole = message.SerializeToString()
    n = int(at * len(whole))
    changed = {
        "truncate": whole[:n],
        "replace": whole[:n] + new + whole[n + len(new) :],
        "insert": whole[:n] + new + whole[n:],
    }[change]
    value = _value(changed) if isinstance(message, ProtoSpan) else changed
    if read_traces(value) is not None:
        _assert_same(value)


# --------------------------------------------------------------------------- the wire format


def _varint(n: int) -> bytes:
    n &= 2**64 - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def _vint(number: int, n: int) -> bytes:
    return _varint(number << 3) + _varint(n)


def _len(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _i64(number: int, n: int) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<Q", n)


def _i32(number: int, n: int) -> bytes:
    return _varint(number << 3 | 5) + struct.pack("<I", n)


def _span_bytes() -> bytes:
    """A failed chat span with one attribute, serialized."""
    span = ProtoSpan(
        trace_id=TRACE_ID, span_id=SPAN_ID, name="chat gpt-4o", kind=ProtoSpan.SPAN_KIND_CLIENT,
        start_time_unix_nano=5, end_time_unix_nano=9,
        status=Status(code=Status.STATUS_CODE_ERROR, message="boom"),
        attributes=[_kv(genai.OPERATION_NAME, AnyValue(string_value="chat"))],
    )  # fmt: skip
    return span.SerializeToString()


def _bare_span() -> bytes:
    """A span with ids and a name, no status."""
    return ProtoSpan(trace_id=TRACE_ID, span_id=SPAN_ID, name="x").SerializeToString()


def _value(span: bytes, scope: bytes = b"", resource: bytes = b"", top: bytes = b"") -> bytes:
    """A message value of one span (its bytes) in a ScopeSpans and a ResourceSpans, with
    the fields `scope` and `resource` before it in them and `top` after them."""
    return _len(1, resource + _len(2, scope + _len(2, span))) + top


def _attribute(value: bytes, key: bytes = _len(1, b"k")) -> bytes:
    """A span holding one attribute: `key` and the AnyValue bytes `value`."""
    return _span_bytes() + _len(9, key + _len(2, value))


UNKNOWN = _vint(90, 3) + _i64(91, 4) + _len(92, b"\xff\xfe") + _i32(93, 5) + _vint(2**29 - 1, 1)

READ_THE_SAME = {
    "unknown fields everywhere": _value(
        _span_bytes() + UNKNOWN + _len(11, _len(2, b"e") + UNKNOWN),
        scope=UNKNOWN + _len(1, UNKNOWN),
        resource=UNKNOWN + _len(1, UNKNOWN + _len(1, _len(1, b"a") + UNKNOWN)),
        top=UNKNOWN,
    ),
    "known fields with another wire type (skipped as unknown)": _value(
        _span_bytes()
        + _vint(5, 1)
        + _len(6, b"\x01")
        + _vint(15, 1)
        + _i32(9, 0)
        + _vint(1, 7)
        + _vint(11, 2)
        + _i64(2, 3),
        scope=_vint(1, 4) + _i32(2, 1),
        resource=_vint(1, 1),
        top=_vint(1, 1),
    ),
    "a value field with another wire type": _value(_attribute(_vint(1, 5) + _i64(3, 9))),
    "a value field of another wire type before a real one": _value(
        _attribute(_len(2, b"\x01") + _vint(3, 9))
    ),
    "scalar fields twice, the last wins": _value(
        _span_bytes()
        + _len(5, b"second")
        + _vint(6, 4)
        + _len(1, b"\x01\x02")
        + _i64(7, 1)
        + _len(3, b"a=1")
        + _len(3, b"a=2")
        + _len(4, b"\xaa")
        + _vint(10, 1)
    ),
    "a key twice in one KeyValue": _value(_attribute(_vint(3, 1), _len(1, b"a") + _len(1, b"b"))),
    "a repeated key keeps its first place and last value": _value(
        _span_bytes()
        + _len(9, _len(1, b"a") + _len(2, _vint(3, 1)))
        + _len(9, _len(1, b"b") + _len(2, _vint(2, 1)))
        + _len(9, _len(1, b"a") + _len(2, _len(5, b"")))
    ),
    "a status code twice and a message twice": _value(
        _bare_span() + _len(15, _vint(3, 2) + _vint(3, 1) + _len(2, b"x") + _len(2, b"y"))
    ),
    "a KeyValue with no value and one with no key": _value(
        _span_bytes() + _len(9, _len(1, b"none")) + _len(9, _len(2, _vint(3, 4)))
    ),
    "key_strindex is skipped": _value(_attribute(_vint(3, 1), _len(1, b"k") + _vint(3, 77))),
    "a present empty string, array and key-value list": _value(
        _span_bytes()
        + _len(9, _len(1, b"s") + _len(2, _len(1, b"")))
        + _len(9, _len(1, b"a") + _len(2, _len(5, b"")))
        + _len(9, _len(1, b"l") + _len(2, _len(6, b"")))
    ),
    "a negative int in 10 bytes and a bool of 2": _value(
        _attribute(_vint(3, -5), _len(1, b"i")) + _len(9, _len(1, b"b") + _len(2, _vint(2, 2)))
    ),
    "a kind past 32 bits": _value(_span_bytes() + _vint(6, 2**32 + 2)),
    "a negative kind and status code": _value(_bare_span() + _vint(6, -3) + _len(15, _vint(3, -1))),
    "a status code past 32 bits": _value(_bare_span() + _len(15, _vint(3, 2**32 + 1))),
    "NaN payloads, -0.0, inf": _value(
        _attribute(_i64(4, 0x7FF0000000000001), _len(1, b"snan"))
        + _len(9, _len(1, b"qnan") + _len(2, _i64(4, 0xFFF8000000000123)))
        + _len(9, _len(1, b"-0") + _len(2, _i64(4, 0x8000000000000000)))
        + _len(9, _len(1, b"inf") + _len(2, _i64(4, 0x7FF0000000000000)))
    ),
    "ids of odd lengths": _value(
        _span_bytes() + _len(1, b"") + _len(2, b"\x00") + _len(4, bytes(range(33)))
    ),
    "the resource after its scopes": _len(
        1, _len(2, _len(2, _span_bytes())) + _len(1, _len(1, _len(1, b"service.name")))
    ),
    "the scope after its spans": _len(1, _len(2, _len(2, _span_bytes()) + _len(1, _len(1, b"n")))),
    "an empty resource, scope and span": _len(1, b"")
    + _len(1, _len(2, b"") + _len(2, _len(2, b""))),
    "entity refs and scope attributes, read and dropped": _value(
        _span_bytes(),
        scope=_len(1, _len(3, _len(1, b"k") + _len(2, _len(5, _len(1, _len(1, b"v")))))),
        resource=_len(
            1, _len(3, _len(1, b"u") + _len(2, b"t") + _len(3, b"a") + _len(4, b"b") + _len(4, b""))
        ),
    ),
    "non-ASCII text": _value(_attribute(_len(1, "Résumé ǅ 𝄞".encode()), _len(1, "ключ".encode()))),
    "the longest tag: 5 bytes, field 2**29 - 1": _value(
        _span_bytes() + _varint((2**29 - 1) << 3) + _varint(1)
    ),
}


@pytest.mark.parametrize("name", list(READ_THE_SAME))
def test_wire_edge_cases_the_reader_reads_decode_the_same(name: str) -> None:
    _assert_same(READ_THE_SAME[name])


def test_scalar_fields_present_twice_keep_their_last_value() -> None:
    (span,) = _assert_same(READ_THE_SAME["scalar fields twice, the last wins"])
    assert (span.name, span.kind, span.trace_id) == ("second", "Producer", "0102")
    assert (span.trace_state, span.parent_span_id, span.start_ns) == ("a=2", "aa", 1)
    (span,) = _assert_same(READ_THE_SAME["a status code twice and a message twice"])
    assert (span.status_code, span.status_message) == ("Ok", "y")
    (span,) = _assert_same(READ_THE_SAME["a repeated key keeps its first place and last value"])
    assert list(span.attributes.items())[1:] == [("a", []), ("b", True)]


def _field(number: int, wire_type: int, n: int, payload: bytes) -> bytes:
    """One field of any wire type: `n` for a varint or fixed-width one, else `payload`."""
    if wire_type == 0:
        return _vint(number, n)
    if wire_type == 1:
        return _i64(number, n)
    return _len(number, payload) if wire_type == 2 else _i32(number, n & 0xFFFFFFFF)


def _fields(numbers: int) -> st.SearchStrategy[bytes]:
    """A few fields of numbers up to `numbers` (known ones mostly), any wire type, their
    bytes random, text or messages."""
    payloads = st.one_of(
        st.binary(max_size=6),
        texts.map(str.encode),
        values.map(AnyValue.SerializeToString),
        key_values.map(lambda kvs: b"".join(_len(1, kv.SerializeToString()) for kv in kvs)),
        statuses.map(lambda status: status.SerializeToString() if status else b""),
    )
    field = st.builds(
        _field, st.integers(1, numbers), st.sampled_from([0, 1, 2, 5]), st.integers(0, 2**64 - 1),
        payloads,
    )  # fmt: skip
    return st.lists(field, min_size=1, max_size=3).map(b"".join)


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(span=spans, in_span=_fields(17), value=values, in_value=_fields(9))
def test_fields_added_to_a_span_and_a_value_decode_the_same_or_are_left_to_upb(
    span: ProtoSpan, in_span: bytes, value: AnyValue, in_value: bytes
) -> None:
    """Fields added after a span's and one of its attribute values' own: known ones again
    (the last wins, or upb merges), with another wire type (skipped), not UTF-8, ..."""
    attribute = _len(9, _len(1, b"k") + _len(2, value.SerializeToString() + in_value))
    message = _value(span.SerializeToString() + in_span + attribute)
    if read_traces(message) is not None:
        _assert_same(message)


def _nested(levels: int, kind: str) -> bytes:
    """An AnyValue's bytes: an int inside `levels` arrays or key-value lists."""
    value = _vint(3, 1)
    for _ in range(levels):
        value = _len(5, _len(1, value)) if kind == "array" else _len(6, _len(1, _len(2, value)))
    return value


@pytest.mark.parametrize("kind", ["array", "kvlist"])
def test_values_nested_past_the_reader_s_limit_are_left_to_upb(kind: str) -> None:
    in_event = _value(_span_bytes() + _len(11, _len(3, _len(1, b"k") + _len(2, _nested(20, kind)))))
    _assert_same(in_event)
    _assert_same(_value(_attribute(_nested(20, kind))))
    spans = _assert_left_to_upb(_value(_attribute(_nested(21, kind))))
    assert spans is not None  # upb reads it
    assert _assert_left_to_upb(_value(_attribute(_nested(60, kind)))) is None  # upb does not


SURROGATE = b"\xed\xa0\x80"
TEN_BYTES = b"\xff" * 9 + b"\x7f"  # a varint of 70 bits: upb drops the 6 past 64
BAD_TEXT = b"ab\xff"
READ_BY_UPB = {
    "two statuses (merged)": _span_bytes() + _len(15, _vint(3, 1)),
    "two value fields in an AnyValue": _attribute(_vint(2, 1) + _vint(3, 5)),
    "the same value field twice": _attribute(_len(1, b"a") + _len(1, b"b")),
    "an array_value twice (merged)": _attribute(
        _len(5, _len(1, _vint(3, 1))) + _len(5, _len(1, _vint(3, 2)))
    ),
    "two values in a KeyValue (merged)": _span_bytes()
    + _len(9, _len(1, b"k") + _len(2, _vint(3, 1)) + _len(2, _len(1, b"s"))),
    "string_value_strindex": _attribute(_vint(8, 3)),
    "an unknown group": _span_bytes() + _varint(90 << 3 | 3) + _vint(1, 1) + _varint(90 << 3 | 4),
    "a kind in a 10-byte varint past 64 bits": _span_bytes() + _varint(6 << 3) + TEN_BYTES,
}
READ_BY_UPB_OUTER = {
    "two scopes (merged)": _value(
        _span_bytes(), scope=_len(1, _len(1, b"a")) + _len(1, _len(2, b"b"))
    ),
    "two resources (merged)": _value(
        _span_bytes(), resource=_len(1, _len(1, _len(1, b"a"))) + _len(1, _len(1, _len(1, b"b")))
    ),
}


@pytest.mark.parametrize("name", [*READ_BY_UPB, *READ_BY_UPB_OUTER])
def test_what_upb_merges_or_reads_otherwise_is_left_to_it(name: str) -> None:
    value = READ_BY_UPB_OUTER.get(name) or _value(READ_BY_UPB[name])
    spans = _assert_left_to_upb(value)
    assert spans is not None and len(spans) == 1


def test_what_upb_merges_is_decoded_merged() -> None:
    (span,) = _assert_left_to_upb(_value(READ_BY_UPB["two statuses (merged)"])) or []
    assert (span.status_code, span.status_message) == ("Ok", "boom")
    (span,) = _assert_left_to_upb(_value(READ_BY_UPB["two value fields in an AnyValue"])) or []
    assert span.attributes["k"] == 5
    (span,) = _assert_left_to_upb(_value(READ_BY_UPB["an array_value twice (merged)"])) or []
    assert span.attributes["k"] == [1, 2]
    (span,) = _assert_left_to_upb(_value(READ_BY_UPB["string_value_strindex"])) or []
    assert span.attributes["k"] is None
    (span,) = _assert_left_to_upb(READ_BY_UPB_OUTER["two resources (merged)"]) or []
    assert span.resource_attributes == {"a": None, "b": None}


INVALID = {
    "bad UTF-8 in an attribute key": _value(_attribute(_len(1, b"v"), _len(1, BAD_TEXT))),
    "a surrogate in a string value": _value(_attribute(_len(1, SURROGATE))),
    "bad UTF-8 in a span name": _value(_span_bytes() + _len(5, BAD_TEXT)),
    "bad UTF-8 in a name later replaced": _value(_span_bytes() + _len(5, BAD_TEXT) + _len(5, b"x")),
    "bad UTF-8 in the status message": _value(_bare_span() + _len(15, _len(2, BAD_TEXT))),
    "bad UTF-8 in an event name": _value(_span_bytes() + _len(11, _len(2, BAD_TEXT))),
    "bad UTF-8 in a link's trace state": _value(_span_bytes() + _len(13, _len(3, BAD_TEXT))),
    "bad UTF-8 in a scope version": _value(_span_bytes(), scope=_len(1, _len(2, BAD_TEXT))),
    "bad UTF-8 in a scope attribute": _value(
        _span_bytes(), scope=_len(1, _len(3, _len(1, b"k") + _len(2, _len(1, BAD_TEXT))))
    ),
    "bad UTF-8 in a scope's schema_url": _value(_span_bytes(), scope=_len(3, BAD_TEXT)),
    "bad UTF-8 in a resource's schema_url": _value(_span_bytes(), resource=_len(3, BAD_TEXT)),
    "bad UTF-8 in an entity ref": _value(
        _span_bytes(), resource=_len(1, _len(3, _len(3, BAD_TEXT)))
    ),
    "bad UTF-8 in a nested key": _value(_attribute(_len(6, _len(1, _len(1, SURROGATE))))),
    "field number 0": _value(_span_bytes() + _vint(0, 1)),
    "wire type 6": _value(_span_bytes()) + _varint(9 << 3 | 6),
    "wire type 7": _value(_span_bytes() + _varint(9 << 3 | 7)),
    "an end group with no start": _value(_span_bytes() + _varint(9 << 3 | 4)),
    "a tag of 6 bytes": _value(_span_bytes() + b"\xa8\x80\x80\x80\x80\x00\x01"),
    "a varint of 11 bytes": _value(_span_bytes() + _varint(6 << 3) + b"\xff" * 10 + b"\x01"),
    "a length past the end": _value(_span_bytes()) + _varint(1 << 3 | 2) + _varint(5) + b"ab",
    "a length past its message's end": _len(1, _len(2, _varint(2 << 3 | 2) + _varint(9)))
    + _len(15, b"1234567"),
    "a fixed64 cut short": _value(_span_bytes() + _varint(7 << 3 | 1) + b"\x01\x02"),
    "a fixed32 cut short": _value(_span_bytes() + _varint(16 << 3 | 5) + b"\x01"),
}


@pytest.mark.parametrize("name", list(INVALID))
def test_bytes_upb_rejects_are_left_to_it_and_raise(name: str) -> None:
    assert _assert_left_to_upb(INVALID[name]) is None


def _rich_span() -> bytes:
    """A span with every kind of field: events, links, nested values, a status."""
    nested = _kvlist([("a", _array([AnyValue(int_value=-1), AnyValue(double_value=0.5)]))])
    attributes = [
        _kv("s", AnyValue(string_value="é")),
        _kv("n", nested),
        _kv("b", AnyValue(bytes_value=b"\x00")),
        _kv("t", AnyValue(bool_value=True)),
    ]
    span = ProtoSpan(
        trace_id=TRACE_ID, span_id=SPAN_ID, parent_span_id=SPAN_ID, name="chat m", kind=3,
        start_time_unix_nano=1, end_time_unix_nano=2, trace_state="k=v", attributes=attributes,
        events=[ProtoSpan.Event(time_unix_nano=3, name="e", attributes=attributes)],
        links=[ProtoSpan.Link(trace_id=TRACE_ID, span_id=SPAN_ID, attributes=attributes)],
        status=Status(code=2, message="boom"), flags=1,
    )  # fmt: skip
    return span.SerializeToString()


@pytest.mark.parametrize("where", ["value", "span"])
def test_every_truncation_is_read_or_rejected_as_upb_does(where: str) -> None:
    """Each prefix of a message value, or of a span inside one (the lengths around it
    adjusted, so the cut lands inside its nested fields): read as upb reads it, or
    rejected where upb rejects it."""
    whole = _demo_values("genai")[0][:2000] if where == "value" else _rich_span()
    for n in range(len(whole) + 1):
        value = whole[:n] if where == "value" else _value(whole[:n])
        try:
            expected = _by_python(value)[0]
        except ValueError:
            assert read_traces(value) is None, n
            continue
        by_reader = _by_reader(value)
        assert by_reader is not None, n
        assert [_exact(s) for s in by_reader[0]] == [_exact(s) for s in expected], n


def test_values_that_are_not_bytes_are_left_to_upb() -> None:
    value = _value(_span_bytes())
    for other in (bytearray(value), memoryview(value)):
        assert read_traces(other) is None
        assert [s.name for s in otlp.decode_spans_message(other, "t", 1)] == ["chat gpt-4o"]
    assert read_traces(b"") == [] and otlp.decode_spans_message(b"", "t", 1) == []


def test_nan_compares_by_its_bits() -> None:
    """The comparison itself: NaN equals NaN, 0.0 is not -0.0, True is not 1."""
    assert _exact({"a": math.nan}) == _exact({"a": math.nan})
    assert _exact(0.0) != _exact(-0.0) and _exact(True) != _exact(1)


# --------------------------------------------------------------------------- the schema

# The fields the reader reads or checks, by message (content/_otlp_reader.c). A field it
# does not know it skips as unknown, unchecked, where upb checks it (a string's UTF-8, a
# message's bytes): every field of the installed opentelemetry-proto must be here.
_T = FieldDescriptor
READER_FIELDS = {
    "opentelemetry.proto.trace.v1.TracesData": {1: _T.TYPE_MESSAGE},
    "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest": {1: _T.TYPE_MESSAGE},
    "opentelemetry.proto.trace.v1.ResourceSpans": {
        1: _T.TYPE_MESSAGE, 2: _T.TYPE_MESSAGE, 3: _T.TYPE_STRING,
    },
    "opentelemetry.proto.resource.v1.Resource": {
        1: _T.TYPE_MESSAGE, 2: _T.TYPE_UINT32, 3: _T.TYPE_MESSAGE,
    },
    "opentelemetry.proto.common.v1.EntityRef": {
        1: _T.TYPE_STRING, 2: _T.TYPE_STRING, 3: _T.TYPE_STRING, 4: _T.TYPE_STRING,
    },
    "opentelemetry.proto.trace.v1.ScopeSpans": {
        1: _T.TYPE_MESSAGE, 2: _T.TYPE_MESSAGE, 3: _T.TYPE_STRING,
    },
    "opentelemetry.proto.common.v1.InstrumentationScope": {
        1: _T.TYPE_STRING, 2: _T.TYPE_STRING, 3: _T.TYPE_MESSAGE, 4: _T.TYPE_UINT32,
    },
    "opentelemetry.proto.common.v1.KeyValue": {
        1: _T.TYPE_STRING, 2: _T.TYPE_MESSAGE, 3: _T.TYPE_INT32,
    },
    "opentelemetry.proto.common.v1.AnyValue": {
        1: _T.TYPE_STRING, 2: _T.TYPE_BOOL, 3: _T.TYPE_INT64, 4: _T.TYPE_DOUBLE,
        5: _T.TYPE_MESSAGE, 6: _T.TYPE_MESSAGE, 7: _T.TYPE_BYTES, 8: _T.TYPE_INT32,
    },
    "opentelemetry.proto.common.v1.ArrayValue": {1: _T.TYPE_MESSAGE},
    "opentelemetry.proto.common.v1.KeyValueList": {1: _T.TYPE_MESSAGE},
    "opentelemetry.proto.trace.v1.Span": {
        1: _T.TYPE_BYTES, 2: _T.TYPE_BYTES, 3: _T.TYPE_STRING, 4: _T.TYPE_BYTES,
        5: _T.TYPE_STRING, 6: _T.TYPE_ENUM, 7: _T.TYPE_FIXED64, 8: _T.TYPE_FIXED64,
        9: _T.TYPE_MESSAGE, 10: _T.TYPE_UINT32, 11: _T.TYPE_MESSAGE, 12: _T.TYPE_UINT32,
        13: _T.TYPE_MESSAGE, 14: _T.TYPE_UINT32, 15: _T.TYPE_MESSAGE, 16: _T.TYPE_FIXED32,
    },
    "opentelemetry.proto.trace.v1.Span.Event": {
        1: _T.TYPE_FIXED64, 2: _T.TYPE_STRING, 3: _T.TYPE_MESSAGE, 4: _T.TYPE_UINT32,
    },
    "opentelemetry.proto.trace.v1.Span.Link": {
        1: _T.TYPE_BYTES, 2: _T.TYPE_BYTES, 3: _T.TYPE_STRING, 4: _T.TYPE_MESSAGE,
        5: _T.TYPE_UINT32, 6: _T.TYPE_FIXED32,
    },
    "opentelemetry.proto.trace.v1.Status": {2: _T.TYPE_STRING, 3: _T.TYPE_ENUM},
}  # fmt: skip


def test_the_reader_knows_every_field_of_the_installed_protos() -> None:
    seen: set[str] = set()
    pending = [TracesData.DESCRIPTOR, ExportTraceServiceRequest.DESCRIPTOR]
    while pending:
        message = pending.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        known = READER_FIELDS.get(message.full_name, {})
        for field in message.fields:
            assert known.get(field.number) == field.type, (message.full_name, field.name)
            if field.message_type is not None:
                pending.append(field.message_type)
    assert seen <= set(READER_FIELDS)


# --------------------------------------------------------------------------- one value


def _read_value_as_upb(value: bytes) -> None:
    """`read_value` reads an AnyValue's bytes as `otlp.any_value` reads upb's parse of them,
    or leaves them to upb (None); `structured_value` gives upb's answer either way."""
    read = otlp.read_value(value)
    try:
        parsed = AnyValue.FromString(value)
    except DecodeError:
        assert read is None, "the reader read bytes upb rejects"
        return
    if read is not None:
        assert _exact(read[0]) == _exact(otlp.any_value(parsed))
    assert _exact(otlp.structured_value(parsed)) == _exact(otlp.any_value(parsed))


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(value=values)
def test_one_value_reads_as_the_python_walk(value: AnyValue) -> None:
    read = otlp.read_value(value.SerializeToString())
    assert read is not None, "the reader left a generated value to upb"
    assert _exact(read[0]) == _exact(otlp.any_value(value))
    _read_value_as_upb(value.SerializeToString())


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    value=values, change=st.sampled_from(["truncate", "replace", "insert"]), at=st.floats(0, 1),
    new=st.binary(min_size=1, max_size=4),
)  # fmt: skip
def test_one_changed_value_reads_as_upb_or_is_left_to_it(
    value: AnyValue, change: str, at: float, new: bytes
) -> None:
    whole = value.SerializeToString()
    n = int(at * len(whole))
    _read_value_as_upb(
        {"truncate": whole[:n], "replace": whole[:n] + new + whole[n + len(new) :],
         "insert": whole[:n] + new + whole[n:]}[change]
    )  # fmt: skip


def test_one_value_nested_past_the_reader_s_depth_is_left_to_upb() -> None:
    value = AnyValue(string_value="deep")
    for _ in range(25):
        value = _array([value])
    assert otlp.read_value(value.SerializeToString()) is None
    assert otlp.structured_value(value) == otlp.any_value(value)
    assert otlp.read_value(b"\x0a\x01\xff") is None  # invalid UTF-8: upb rejects it
    assert otlp.read_value(b"") == (None,)  # no value set


# --------------------------------------------------------------------------- JSON text

MEMBER = "k"  # a key `keys` draws often: the members read are exercised


def _json_by_python(value: AnyValue) -> tuple[str, list[Any]] | None:
    """What `messages_json` answers, from upb's parse and `json.dumps`: None unless the
    value is an array of key-value lists (at least one)."""
    python = otlp.any_value(value)
    if not (isinstance(python, list) and python and all(isinstance(m, dict) for m in python)):
        return None
    return json.dumps(python, ensure_ascii=False, default=str), [m.get(MEMBER) for m in python]


def _left_to_python(value: AnyValue) -> bool:
    """Whether `messages_json` leaves a value to Python: it holds bytes (json.dumps has no
    text for them), or a key-value list with a key twice or more than 64 keys."""
    kind = value.WhichOneof("value")
    if kind == "bytes_value":
        return True
    if kind == "array_value":
        return any(_left_to_python(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        pairs = value.kvlist_value.values
        keys = [kv.key for kv in pairs]
        return (
            len(set(keys)) < len(keys)
            or len(keys) > 64
            or any(_left_to_python(kv.value) for kv in pairs)
        )
    return False


def _assert_json_as_python(value: bytes) -> bool:
    """`messages_json` writes `value` as `json.dumps` writes upb's parse of it, or leaves
    it to Python (None); whether it wrote it."""
    written = otlp.messages_json(value, MEMBER)
    try:
        parsed = AnyValue.FromString(value)
    except DecodeError:
        assert written is None, "the reader wrote bytes upb rejects"
        return False
    if written is None:
        return False
    expected = _json_by_python(parsed)
    assert expected is not None, "the reader wrote a value that is not an array of maps"
    assert written[0] == expected[0]
    assert _exact(written[1]) == _exact(expected[1])
    return True


maps = st.lists(st.tuples(keys, values | st.none()), max_size=5).map(_kvlist)
arrays_of_maps = st.lists(maps, min_size=1, max_size=4).map(_array)


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(value=arrays_of_maps)
def test_an_array_of_maps_is_written_as_json_dumps_writes_it(value: AnyValue) -> None:
    """Every generated array of maps is written, except exactly those holding bytes or a
    key twice in one map (the declines, each for its reason)."""
    wrote = _assert_json_as_python(value.SerializeToString())
    assert wrote is not _left_to_python(value)


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(value=values | arrays_of_maps)
def test_any_other_value_is_left_to_python(value: AnyValue) -> None:
    wrote = _assert_json_as_python(value.SerializeToString())
    assert wrote is (_json_by_python(value) is not None and not _left_to_python(value))


@settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    value=arrays_of_maps, change=st.sampled_from(["truncate", "replace", "insert"]),
    at=st.floats(0, 1), new=st.binary(min_size=1, max_size=4),
)  # fmt: skip
def test_a_changed_array_of_maps_is_written_as_upb_reads_it_or_left(
    value: AnyValue, change: str, at: float, new: bytes
) -> None:
    whole = value.SerializeToString()
    n = int(at * len(whole))
    _assert_json_as_python(
        {"truncate": whole[:n], "replace": whole[:n] + new + whole[n + len(new) :],
         "insert": whole[:n] + new + whole[n:]}[change]
    )  # fmt: skip


def test_json_text_edge_cases() -> None:
    """Escapes and numbers as json.dumps writes them; what is left to Python."""
    escaped = 'q" b\\ \b\f\n\r\t \x00\x1f \x7f é \u2028 😀'
    numbers = [1.5, -0.0, 1e16, 1e-7, float("nan"), float("inf"), -float("inf"), 0.1 + 0.2]
    integers = (0, -(2**63), 2**63 - 1)
    written = _kvlist([
        (escaped, AnyValue(string_value=escaped)),
        ("n", _array([AnyValue(double_value=x) for x in numbers])),
        ("i", _array([AnyValue(int_value=i) for i in integers])),
        ("e", _array([])), ("m", _kvlist([])), ("z", None), (MEMBER, None),
    ])  # fmt: skip
    assert _assert_json_as_python(_array([written, _kvlist([])]).SerializeToString())
    deep = AnyValue(string_value="deep")
    for _ in range(25):
        deep = _array([deep])
    wide = _kvlist([(str(n), AnyValue(int_value=n)) for n in range(65)])
    bad_key = (
        _array([_kvlist([("a", None)])]).SerializeToString().replace(b"\x0a\x01a", b"\x0a\x01\xff")
    )
    for left in (
        _array([_kvlist([("x", deep)])]),
        _array([wide]),
        _array([]),
        _kvlist([("a", None)]),
        _array([_kvlist([("a", None)]), AnyValue(string_value="not a map")]),
        _array([_kvlist([("a", AnyValue(bytes_value=b"x"))])]),
        _array([_kvlist([("a", None), ("a", None)])]),
    ):
        assert otlp.messages_json(left.SerializeToString(), MEMBER) is None
    assert otlp.messages_json(bad_key, MEMBER) is None
    assert otlp.messages_json(_array([wide]).SerializeToString()[:-3], MEMBER) is None
    with pytest.raises(TypeError):
        otlp.messages_json("not bytes", MEMBER)
