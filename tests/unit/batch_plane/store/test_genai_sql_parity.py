"""The SQL mapping (`batch_plane.store.genai_sql`, run on chDB) beside the Python one
(`content.conventions` over `schemas.genai_mapping`, as the decoder applies it): the same
OTLP spans through both, every GenAI and evaluation column compared field by field, every
decline counted by reason (`tests.support.parity`). Inputs: the demo agent's raw traffic in
every convention, a table of the mapping's edge cases (each with the answer it must get:
decided, or declined for a named reason) and generated spans over the mapping's keys.

The SQL side reads a span as the store's insert reads it (`genai_sql.ArrayAttributeSql`
over the attribute arrays, `genai_sql.declines_sql`), from a table of those arrays, in
one statement per batch; the Python side decodes the span (`content.otlp`) and reads its
row's columns (`span_rows.span_row`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as OtlpSpan
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store import genai_sql as sql
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.genai_sql import (
    ATTRIBUTE_ARRAYS,
    DECLINES,
    FLATTENED,
    KIND_NOT_ASCII,
    NOT_COUNT,
    NOT_TEXT,
    SQL_COUNT_KEYS,
    SQL_TEXT_KEYS,
    ArrayAttributeSql,
    quote,
)
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.content import otlp
from pathgrade.schemas import genai as g
from pathgrade.schemas import genai_mapping as m
from pathgrade.schemas.decline import Decision, Declined
from pathgrade.schemas.model import GenAIFields

from pathgrade.demo.sender import send_demo_traces
from tests.support.otlp_values import any_value
from tests.support.parity import Parity

Columns = dict[str, Any]
_STATUS = {0: "Unset", 1: "Ok", 2: "Error"}  # the status code's text the SQL reads
_batches = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    opened = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("genai_sql"))))
    yield opened
    opened.close()


def _select(table: str) -> str:
    """The SELECT of the GenAI columns (after the decline's reason, "" when decided) over
    `table`, of `ATTRIBUTE_ARRAYS`, the span's name and its status text, as the SQL
    mapping compiles them now."""
    attributes = ArrayAttributeSql()
    genai = sql.genai_sql(attributes, "name", "status")
    named = dict(attributes.definitions)
    for step in genai.steps:
        named.update(step)
    declines = "".join(f"{when}, {quote(why.reason)}, " for why, when in sql.declines_sql())
    values = ",\n  ".join(f"{expression} AS {name}" for name, expression in named.items())
    columns = ",\n  ".join(f"{expression} AS `{c}`" for c, expression in genai.columns.items())
    return (
        f"WITH\n  {values}\nSELECT number, multiIf({declines}'') AS reason,\n  {columns}\n"
        f"FROM {table} ORDER BY number"
    )


COLUMNS = list(sql.genai_sql(ArrayAttributeSql(), "name", "status").columns)
_BY_REASON = {declined.reason: declined for declined in DECLINES}


def _arrays(span: OtlpSpan) -> list[list[Any]]:
    """The span's attribute arrays as the insert's SQL has them (`ATTRIBUTE_ARRAYS`)."""
    kinds = [kv.value.WhichOneof("value") or "" for kv in span.attributes]
    return [
        [kv.key for kv in span.attributes],
        kinds,
        [kv.value.string_value for kv in span.attributes],
        [kv.value.int_value for kv in span.attributes],
    ]


def by_sql(store: ClientStore, spans: list[OtlpSpan]) -> list[Decision[Columns]]:
    """The SQL mapping's answer per span: its GenAI columns, or why it declines the span
    (`FLATTENED` found in Python first, as the insert path does, the others by the SQL)."""
    table = f"genai_sql_parity_{next(_batches)}"
    arrays = ", ".join(
        f"{name} Array({kind})"
        for name, kind in zip(ATTRIBUTE_ARRAYS, ("String",) * 3 + ("Int64",), strict=True)
    )  # fmt: skip
    store.command(f"CREATE TABLE {table} (number UInt32, name String, status String, "
                  f"{arrays}) ENGINE = Memory")  # fmt: skip
    sent = [
        i
        for i, span in enumerate(spans)
        if not sql.has_flattened_keys(kv.key for kv in span.attributes)
    ]
    rows = [[i, spans[i].name, _STATUS[spans[i].status.code], *_arrays(spans[i])] for i in sent]
    store.insert(table, rows, ["number", "name", "status", *ATTRIBUTE_ARRAYS])
    answers: list[Decision[Columns]] = [FLATTENED] * len(spans)
    for number, reason, *values in store.query(_select(table)).rows:
        answers[number] = _BY_REASON[reason] if reason else dict(zip(COLUMNS, values, strict=True))
    store.command(f"DROP TABLE {table}")
    return answers


def by_python(span: OtlpSpan) -> Columns:
    """The Python mapping's GenAI columns of the span, as the decoder reads it."""
    traces = TracesData()
    traces.resource_spans.add().scope_spans.add().spans.append(span)
    (decoded,) = otlp.decode_spans_message(traces.SerializeToString(), "acme", 1)
    row = dict(zip(SPAN_COLUMNS, span_row(decoded), strict=True))
    return {column: row[column] for column in COLUMNS}


def _parity(store: ClientStore, spans: list[OtlpSpan]) -> tuple[Parity, list[Decision[Columns]]]:
    """Both mappings over `spans`, compared; the harness and the SQL side's answers."""
    answers = by_sql(store, spans)
    parity: Parity[int, Columns] = Parity("SQL mapping / Python mapping")
    parity.check(range(len(spans)), answers.__getitem__, lambda i: by_python(spans[i]),
                 label=lambda i: f"{spans[i].name!r} {list(spans[i].attributes)!r}")  # fmt: skip
    return parity, answers


def _span(
    name: str, attributes: list[tuple[str, Any]] | dict[str, Any], status: int = 0
) -> OtlpSpan:
    span = OtlpSpan(name=name, trace_id=b"\x01" * 16, span_id=b"\x02" * 8)
    span.status.code = status  # type: ignore[assignment]
    items = attributes.items() if isinstance(attributes, dict) else attributes
    for key, raw in items:
        span.attributes.add(key=key, value=any_value(raw))
    return span


def test_the_sql_columns_are_the_genai_and_evaluation_columns_of_the_spans_table() -> None:
    assert set(COLUMNS) <= set(SPAN_COLUMNS)
    assert {c for c in SPAN_COLUMNS if c.startswith(("GenAI", "Eval"))} == set(COLUMNS)


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_in_every_convention(store: ClientStore, flavor: str) -> None:
    """Raw (nothing redacted): the content keys, and in the other conventions flattened
    messages, which only the Python mapping reads."""
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=30, seed=7, flavor=flavor)
    request = encode_spans(exporter.get_finished_spans())
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    parity, _ = _parity(store, spans)
    parity.assert_holds(min_decided=len(spans) // 2)
    assert (parity.declined[FLATTENED.reason] > 0) == (flavor != "genai")


# (case, span name, attributes, status, the SQL mapping's answer: None decided, else why not)
EDGE_CASES: list[tuple[str, str, list[tuple[str, Any]], int, Declined | None]] = [
    ("genai chat", "chat m", [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m"),
                              ("gen_ai.usage.input_tokens", 3), ("gen_ai.usage.output_tokens", 4)],
     0, None),
    ("deprecated aliases", "chat gpt", [("gen_ai.system", "openai"),
                                        ("gen_ai.usage.prompt_tokens", "12"),
                                        ("gen_ai.usage.completion_tokens", 0)], 0, None),
    ("span name target", "execute_tool lookup", [], 0, None),
    ("span name other op", "execute_tool x", [("gen_ai.operation.name", "chat")], 0, None),
    ("name without target", "invoke_agent", [], 0, None),
    ("name of two spaces", "invoke_agent  a b", [], 0, None),
    ("empty name", "", [("gen_ai.agent.name", "a")], 0, None),
    ("openinference kinds", "x", [("openinference.span.kind", "tool"), ("tool.name", "t"),
                                  ("input.value", "{}"), ("output.value", "ok")], 0, None),
    ("openinference unknown", "x", [("openinference.span.kind", "UNKNOWN"),
                                    ("traceloop.span.kind", "tool")], 0, None),
    ("openinference other", "x", [("openinference.span.kind", "weird")], 0, None),
    ("openinference empty kind", "chat m", [("openinference.span.kind", "")], 0, None),
    ("openinference llm value", "x", [("openinference.span.kind", "LLM"), ("input.value", "hi"),
                                      ("output.value", "yo")], 0, None),
    ("traceloop agent", "invoke_agent x", [("traceloop.span.kind", "workflow"),
                                           ("traceloop.entity.name", "flow")], 0, None),
    ("traceloop tool", "x", [("traceloop.span.kind", "tool"), ("traceloop.entity.name", "t"),
                             ("traceloop.entity.input", '{"a":1}')], 0, None),
    ("traceloop other kind", "x", [("traceloop.span.kind", "other"),
                                   ("llm.request.type", "chat")], 0, None),
    ("request type", "x", [("llm.request.type", "completion"), ("llm.usage.total_tokens", 9)],
     0, None),
    ("legacy prompt", "x", [("llm.request.type", "chat"), ("gen_ai.prompt", "p"),
                            ("gen_ai.completion", "c")], 0, None),
    ("both messages keys", "chat m", [("gen_ai.input.messages", ""), ("gen_ai.prompt", "p"),
                                      ("gen_ai.output.messages", "[]")], 0, None),
    ("error status", "x", [], 2, None),
    ("error type", "x", [("error.type", "timeout")], 2, None),
    ("ok status", "x", [], 1, None),
    ("eval context", "x", [("pathgrade.run.id", "r"), ("pathgrade.replay.index", 4),
                           ("pathgrade.dataset.item_id", "i"), ("pathgrade.variant.id", "v"),
                           ("pathgrade.suite.version", "s")], 0, None),
    ("replay too large", "x", [("pathgrade.replay.index", 2**32)], 0, None),
    ("replay as text", "x", [("pathgrade.replay.index", "7")], 0, None),
    ("negative tokens", "x", [("gen_ai.usage.input_tokens", -1),
                              ("gen_ai.usage.output_tokens", 2)], 0, None),
    ("token sum overflows", "x", [("gen_ai.usage.input_tokens", 2**63 - 1),
                                  ("gen_ai.usage.output_tokens", 2**63 - 1)], 0, None),
    ("token sum past UInt64", "x", [("gen_ai.usage.input_tokens", "9999999999999999999"),
                                    ("gen_ai.usage.output_tokens", "9999999999999999999")],
     0, None),
    ("empty token text", "x", [("gen_ai.usage.input_tokens", ""),
                               ("llm.token_count.prompt", 5)], 0, None),
    ("unicode text", "x", [("gen_ai.tool.name", "🔧"), ("gen_ai.agent.name", "é")], 0, None),
    ("other keys of any kind", "x", [("a", [["x"]]), ("f", 1e16), ("m", {"k": "v"})], 0, None),
    ("text key not text", "x", [("gen_ai.request.model", 5)], 0, NOT_TEXT),
    ("text key a list", "x", [("gen_ai.tool.name", ["a"])], 0, NOT_TEXT),
    ("text key bytes", "x", [("gen_ai.conversation.id", b"c")], 0, NOT_TEXT),
    ("token count as float", "x", [("gen_ai.usage.input_tokens", 12.0)], 0, NOT_COUNT),
    ("token count as decimal text", "x", [("gen_ai.usage.input_tokens", "12.0")], 0, NOT_COUNT),
    ("token count with blanks", "x", [("gen_ai.usage.input_tokens", " 12")], 0, NOT_COUNT),
    ("token count as bool", "x", [("llm.usage.total_tokens", True)], 0, NOT_COUNT),
    ("non-ascii span kind", "x", [("openinference.span.kind", "ß")], 0, KIND_NOT_ASCII),
    ("flattened prompt", "x", [("llm.request.type", "chat"), ("gen_ai.prompt.0.role", "user"),
                               ("gen_ai.prompt.0.content", "hi")], 0, FLATTENED),
    ("flattened openinference", "x", [("openinference.span.kind", "LLM"),
                                      ("llm.input_messages.0.message.role", "user")], 0, FLATTENED),
]  # fmt: skip


def test_edge_cases_get_their_answers(store: ClientStore) -> None:
    """Every case decided is compared; every case gets the answer the table says."""
    spans = [_span(name, attributes, status) for _, name, attributes, status, _ in EDGE_CASES]
    parity, answers = _parity(store, spans)
    got = [answer if isinstance(answer, Declined) else None for answer in answers]
    expected = [declined for *_, declined in EDGE_CASES]
    wrong = [
        (case[0], a, e) for case, a, e in zip(EDGE_CASES, got, expected, strict=True) if a != e
    ]
    assert not wrong, wrong
    parity.assert_holds(min_decided=expected.count(None))
    assert set(parity.declined) == {d.reason for d in expected if d is not None}


_KINDS = (*m.OPENINFERENCE_OPERATIONS, *m.TRACELOOP_OPERATIONS, *m.LLM_REQUEST_TYPE_OPERATIONS)
_words = st.one_of(
    st.sampled_from(sorted({*g.OPERATIONS, *_KINDS, "UNKNOWN", "llm", "gpt-4o", ""})),
    st.text(max_size=8),
)
_counts = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**64).map(str),
    st.sampled_from(["", "0", "12", "12.0", " 7", "²", "00"]),
)  # fmt: skip
_others = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.binary(max_size=3),
                    st.lists(st.text(max_size=3), max_size=2))  # fmt: skip


def _value(key: str) -> st.SearchStrategy[Any]:
    """Mostly what the key holds in the field, one time in eight another kind."""
    usual = _counts if key in SQL_COUNT_KEYS else _words
    return st.integers(0, 7).flatmap(lambda n: _others if n == 0 else usual)


_keys = st.sampled_from(sorted(SQL_TEXT_KEYS | SQL_COUNT_KEYS | {"http.method", "user.id"}))
_spans = st.builds(
    _span,
    st.one_of(_words, st.tuples(_words, _words).map(" ".join)),
    st.lists(_keys.flatmap(lambda k: st.tuples(st.just(k), _value(k))), max_size=8).map(dict),
    st.sampled_from(sorted(_STATUS)),
)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.lists(_spans, min_size=40, max_size=80))
def test_generated_spans(store: ClientStore, spans: list[OtlpSpan]) -> None:
    parity, _ = _parity(store, spans)
    parity.assert_holds()


def test_removing_either_side_fails_the_parity_check(
    store: ClientStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SQL mapping that decides nothing fails the check (every decline counted by its
    reason); so does one whose column differs, and a Python mapping that is gone (the
    decoder then reads the empty view)."""
    cases = [c for c in EDGE_CASES if c[-1] is None]
    spans = [_span(name, attributes, status) for _, name, attributes, status, _ in cases]
    with monkeypatch.context() as patched:
        patched.setattr(sql, "declines_sql", lambda: [(NOT_TEXT, "1")])
        with pytest.raises(
            AssertionError, match=rf"decided 0 items .*{NOT_TEXT.reason}': {len(spans)}"
        ):
            _parity(store, spans)[0].assert_holds()
    with monkeypatch.context() as patched:
        patched.setattr(sql, "first_text", lambda attr, keys: "''")
        with pytest.raises(AssertionError, match=r"(?s)fields differ.*GenAIProvider"):
            _parity(store, spans)[0].assert_holds()
    monkeypatch.setattr(otlp, "genai_fields", lambda name, attributes: GenAIFields())
    with pytest.raises(AssertionError, match=r"(?s)fields differ.*GenAIOperation"):
        _parity(store, spans)[0].assert_holds()
