"""The store's SQL insert path (ClickHouse parsing OTLP, batch_plane.store.otlp_insert)
writes the rows the Python decoder writes, or refuses the message, which then takes the
Python path: on the demo agent's traffic in every convention (as the collector forwards
it on default settings, facts recorded and content dropped; with every tool and the
messages captured; raw) and on every edge case where the two readers could differ. Every
column of the `spans` table is compared (a column a migration adds is compared too), and
the rows the materialized views derive from them (`trace_roots`, `span_counts`). One
chDB store for the module; each case is its own tenant pair."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store import otlp_insert
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.otlp_insert import insert_messages, pending_message
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import CAPTURE_ALL_TOOLS, RedactionConfig, Redactor
from pathgrade.content import otlp
from pathgrade.content.fingerprints import SECRET_BYTES, FactSecret
from pathgrade.content.otlp import decode_spans_message
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas.decline import declined
from pathgrade.schemas.model import GenAIFields

from pathgrade.demo.sender import send_demo_traces
from tests.support.forwarded import as_published
from tests.support.otlp_values import any_value
from tests.support.parity import Parity

pytestmark = pytest.mark.integration

_tenants = itertools.count()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClientStore]:
    from pathgrade.batch_plane.store.migration_runner import migrate

    opened = open_client_store(embedded_dsn(str(tmp_path_factory.mktemp("parity"))))
    migrate(opened.client)
    yield opened
    opened.close()


_DERIVED = {  # table: its order, of the rows the materialized views write from `spans`
    "trace_roots": "TraceId",
    "span_counts": "Minute, ServiceName, GenAIAgentName, GenAIToolName, Model",
}


def _columns(store: ClientStore, table: str) -> list[str]:
    """The columns of `table` as the migrated store has them."""
    return [
        name
        for (name,) in store.query(
            "SELECT name FROM system.columns WHERE database = currentDatabase() "
            "AND table = {t:String} ORDER BY position",
            {"t": table},
        ).rows
    ]


def _rows(store: ClientStore, table: str, tenant: str, order: str) -> list[dict[str, Any]]:
    """Every column but the tenant of `table`'s rows of `tenant`, in `order`."""
    columns = [c for c in _columns(store, table) if c != "Tenant"]
    names = ", ".join(f"`{c}`" for c in columns)
    result = store.query(
        f"SELECT {names} FROM {table} WHERE Tenant = {{t:String}} ORDER BY {order}",
        {"t": tenant},
    )
    return [dict(zip(columns, row, strict=True)) for row in result.rows]


def test_both_paths_write_every_column_of_the_spans_table(store: ClientStore) -> None:
    """A column a migration adds to `spans` must be written by both paths (or be derived
    by the store, and then it is compared like the others)."""
    assert sorted(SPAN_COLUMNS) == sorted(_columns(store, "spans"))


def _compare(store: ClientStore, values: list[bytes], min_decided: int = 0) -> int:
    """Store `values` both ways (the SQL insert's answers counted by the parity harness);
    assert equal rows, and at least `min_decided` messages inserted by the SQL; returns
    how many messages the SQL path declined (left to Python)."""
    number = next(_tenants)
    python, sql = f"py{number}", f"sql{number}"
    received = time.time_ns()
    rows = [span_row(s) for v in values for s in decode_spans_message(v, python, received)]
    store.insert_encodable("spans", rows, list(SPAN_COLUMNS))  # a span out of range: left out
    answers = insert_messages(store, [pending_message(v, sql, received) for v in values])
    parity: Parity = Parity("SQL insert / span_rows")
    parity.note(answers)
    kept_values = [v for v, answer in zip(values, answers, strict=True) if not declined(answer)]
    kept = {s.trace_id for v in kept_values for s in decode_spans_message(v, python, received)}
    expected = [r for r in _rows(store, "spans", python, "TraceId, SpanId") if r["TraceId"] in kept]
    parity.compare("spans", _rows(store, "spans", sql, "TraceId, SpanId"), expected)
    if len(kept_values) == len(values):  # the views' rows of the same spans
        for table, order in _DERIVED.items():
            by_sql, by_python = _rows(store, table, sql, order), _rows(store, table, python, order)
            parity.compare(table, by_sql, by_python)
    parity.assert_holds(min_decided)
    return sum(parity.declined.values())


def _demo_values(flavor: str, redaction: RedactionConfig | None) -> list[bytes]:
    """The demo agent's traffic in `flavor`, one value per trace; with `redaction`, as the
    collector forwards it (facts recorded first, as on its default settings)."""
    exporter = InMemorySpanExporter()
    send_demo_traces(exporter, traces=40, seed=5, flavor=flavor)
    request = ExportTraceServiceRequest.FromString(
        encode_spans(exporter.get_finished_spans()).SerializeToString()
    )
    if redaction is None:
        return [m.value for m in group_by_trace(as_published(request)).messages]
    facts = FactMaker(FactSecret(b"k" * SECRET_BYTES), PiiScanner())
    return [m.value for m in group_by_trace(Redactor(redaction, facts).forward(request)).messages]


def _has_facts(values: list[bytes]) -> bool:
    return any(b"pathgrade.facts." in v for v in values)


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_as_the_collector_forwards_it(store: ClientStore, flavor: str) -> None:
    values = _demo_values(flavor, RedactionConfig())
    assert _has_facts(values)
    # default settings: every message on the SQL path
    assert _compare(store, values, min_decided=len(values)) == 0


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_with_content_captured(store: ClientStore, flavor: str) -> None:
    capture = RedactionConfig(capture_tools=[CAPTURE_ALL_TOOLS], capture_messages=True)
    values = _demo_values(flavor, capture)
    assert _has_facts(values)
    left = _compare(store, values)
    if flavor != "genai":  # flattened messages: the Python decoder rebuilds them
        assert left > 0


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_raw(store: ClientStore, flavor: str) -> None:
    left = _compare(store, _demo_values(flavor, None))
    if flavor != "genai":
        assert left > 0


def _one_span(
    attributes: list[tuple[str, Any]],
    name: str = "span",
    status: int = 0,
    resource: list[tuple[str, Any]] | None = None,
    events: list[tuple[str, list[tuple[str, Any]]]] = (),  # type: ignore[assignment]
    start: int = 1_700_000_000_000_000_000,
    link: list[tuple[str, Any]] | None = None,
) -> bytes:
    traces = TracesData()
    resource_spans = traces.resource_spans.add()
    for key, raw in resource or [("service.name", "svc")]:
        resource_spans.resource.attributes.add(key=key, value=any_value(raw))
    scope = resource_spans.scope_spans.add()
    scope.scope.name = "scope"
    span = scope.spans.add(
        trace_id=next(_trace_ids), span_id=b"\x01" * 8, name=name, kind=3,
        start_time_unix_nano=start, end_time_unix_nano=start + 5,
    )  # fmt: skip
    span.status.code = status
    for key, raw in attributes:
        span.attributes.add(key=key, value=any_value(raw))
    for event_name, event_attributes in events:
        event = span.events.add(time_unix_nano=start + 1, name=event_name)
        for key, raw in event_attributes:
            event.attributes.add(key=key, value=any_value(raw))
    span_link = span.links.add(trace_id=b"\x02" * 16, span_id=b"\x03" * 8)
    for key, raw in link or [("link.kind", "parent")]:
        span_link.attributes.add(key=key, value=any_value(raw))
    return traces.SerializeToString()


_trace_ids = (i.to_bytes(16, "big") for i in itertools.count(1))

# (case, attributes, extra keyword arguments of _one_span, whether the SQL path keeps it)
EDGE_CASES: list[tuple[str, list[tuple[str, Any]], dict[str, Any], bool]] = [
    ("genai chat", [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m"),
                    ("gen_ai.usage.input_tokens", 3), ("gen_ai.usage.output_tokens", 4),
                    ("gen_ai.response.finish_reasons", ["stop"])], {}, True),
    ("deprecated aliases", [("gen_ai.system", "openai"), ("gen_ai.usage.prompt_tokens", "12"),
                            ("gen_ai.usage.completion_tokens", 0)], {"name": "chat gpt"}, True),
    ("span name target", [], {"name": "execute_tool lookup"}, True),
    ("span name other op", [("gen_ai.operation.name", "chat")], {"name": "execute_tool x"}, True),
    ("name without target", [], {"name": "invoke_agent"}, True),
    ("openinference kinds", [("openinference.span.kind", "tool"), ("tool.name", "t"),
                             ("input.value", "{}"), ("output.value", "ok")], {}, True),
    ("openinference unknown", [("openinference.span.kind", "UNKNOWN"),
                               ("traceloop.span.kind", "tool")], {}, True),
    ("openinference other", [("openinference.span.kind", "weird")], {}, True),
    ("openinference llm value", [("openinference.span.kind", "LLM"),
                                 ("input.value", "hi"), ("output.value", "yo")], {}, True),
    ("traceloop agent", [("traceloop.span.kind", "workflow"),
                         ("traceloop.entity.name", "flow")], {"name": "invoke_agent x"}, True),
    ("traceloop tool", [("traceloop.span.kind", "tool"), ("traceloop.entity.name", "t"),
                        ("traceloop.entity.input", "{\"a\":1}")], {}, True),
    ("request type", [("llm.request.type", "completion"), ("llm.usage.total_tokens", 9)],
     {}, True),
    ("legacy prompt", [("llm.request.type", "chat"), ("gen_ai.prompt", "p"),
                       ("gen_ai.completion", "c")], {}, True),
    ("error status", [], {"status": 2}, True),
    ("error type", [("error.type", "timeout")], {"status": 2}, True),
    ("eval context", [("pathgrade.run.id", "r"), ("pathgrade.replay.index", 4),
                      ("pathgrade.dataset.item_id", "i")], {}, True),
    ("replay too large", [("pathgrade.replay.index", 2**32)], {}, True),
    ("negative tokens", [("gen_ai.usage.input_tokens", -1),
                         ("gen_ai.usage.output_tokens", 2)], {}, True),
    ("token sum overflows", [("gen_ai.usage.input_tokens", 2**63 - 1),
                             ("gen_ai.usage.output_tokens", 2**63 - 1)], {}, True),
    ("token sum past UInt64", [("gen_ai.usage.input_tokens", "9999999999999999999"),
                               ("gen_ai.usage.output_tokens", "9999999999999999999")], {}, True),
    ("token sum at UInt64's end", [("gen_ai.usage.input_tokens", "9223372036854775808"),
                                   ("gen_ai.usage.output_tokens", 2**63 - 1)], {}, True),
    ("scalars", [("b", True), ("i", -7), ("f", 0.5), ("z", 0.0), ("g", 3.0), ("by", b"\x00\xff"),
                 ("none", None), ("empty", "")], {}, True),
    ("arrays", [("a", ["x", 1, True, b"ab", None]), ("e", [])], {}, True),
    ("content keys", [("gen_ai.input.messages", "[]"), ("llm.prompts.0", "p"), ("user.id", "u")],
     {}, True),
    ("content event", [], {"events": [("gen_ai.user.message", [("content", "hi")]),
                                      ("exception", [("exception.type", "E"),
                                                     ("gen_ai.prompt", "p")])]}, True),
    ("unicode text", [("k", "é ✓ \n"), ("gen_ai.tool.name", "🔧")], {}, True),
    ("one key in two events", [], {"events": [("a", [("k", "1")]), ("b", [("k", 2)])]}, True),
    ("link values", [], {"link": [("n", 3), ("a", ["x", 1])]}, True),
    # outside what the SQL reads: the Python path stores them
    ("nested twice", [("a", [["x"]])], {}, False),
    ("map value", [("m", {"k": "v"})], {}, False),
    ("float text", [("f", 1e16)], {}, False),
    ("tiny float", [("f", 1e-7)], {}, False),
    ("negative zero", [("f", -0.0)], {}, False),
    ("nan", [("f", float("nan"))], {}, False),
    ("float in array", [("a", [0.5])], {}, False),
    ("escaped text in array", [("a", ['say "hi"'])], {}, False),
    ("non-ascii in array", [("a", ["é"])], {}, False),
    ("duplicate keys", [("k", "a"), ("k", "b")], {}, False),
    ("duplicate resource keys", [], {"resource": [("service.name", "a"), ("service.name", "b")]},
     False),
    ("service name not text", [], {"resource": [("service.name", 5)]}, False),
    ("duplicate event keys", [], {"events": [("e", [("k", "a"), ("k", "b")])]}, False),
    ("map value in an event", [], {"events": [("e", [("m", {"k": "v"})])]}, False),
    ("duplicate link keys", [], {"link": [("k", "a"), ("k", "b")]}, False),
    ("float text in a link", [], {"link": [("f", 1e16)]}, False),
    ("flattened prompt", [("llm.request.type", "chat"), ("gen_ai.prompt.0.role", "user"),
                          ("gen_ai.prompt.0.content", "hi")], {}, False),
    ("flattened openinference", [("openinference.span.kind", "LLM"),
                                 ("llm.input_messages.0.message.role", "user"),
                                 ("llm.input_messages.3.0.message.content", "x")], {}, False),
    ("index 3.0", [("llm.request.type", "chat"), ("gen_ai.completion.3.0.content", "c")],
     {}, False),
    ("text key not text", [("gen_ai.request.model", 5)], {}, False),
    ("token count as float", [("gen_ai.usage.input_tokens", 12.0)], {}, False),
    ("token count as decimal text", [("gen_ai.usage.input_tokens", "12.0")], {}, False),
    ("token count with blanks", [("gen_ai.usage.input_tokens", " 12")], {}, False),
    ("non-ascii span kind", [("openinference.span.kind", "ß")], {}, False),
    ("start past the store's range", [], {"start": 2**63}, False),
]  # fmt: skip


def test_edge_cases_inside_the_sql_stay_on_its_path(store: ClientStore) -> None:
    """One batch of every case the SQL reads: its rows equal the Python decoder's."""
    values = [_one_span(a, **o) for _, a, o, on_sql_path in EDGE_CASES if on_sql_path]
    assert _compare(store, values, min_decided=len(values)) == 0


@pytest.mark.parametrize(
    ("attributes", "options"),
    [pytest.param(a, o, id=case) for case, a, o, on_sql_path in EDGE_CASES if not on_sql_path],
)
def test_edge_cases_outside_the_sql_take_the_python_path(
    store: ClientStore, attributes: list[tuple[str, Any]], options: dict[str, Any]
) -> None:
    assert _compare(store, [_one_span(attributes, **options)]) == 1


def test_a_refused_message_leaves_the_others_of_its_batch_on_the_sql_path(
    store: ClientStore,
) -> None:
    values = [_one_span([("k", f"v{i}")]) for i in range(6)]
    values.insert(3, _one_span([("a", [["deep"]])]))
    assert _compare(store, values) == 1


def test_a_span_twice_in_one_insert_is_read_once_with_final(store: ClientStore) -> None:
    """The insert skips ClickHouse's per-block deduplication (`INSERT_SETTINGS`): a message
    in a batch twice (an at-least-once redelivery) is two rows until a merge, and one to
    every reader that asks for `FINAL`, as a message inserted by two batches is."""
    tenant = f"twice{next(_tenants)}"
    values = [_one_span([("k", f"v{i}")]) for i in range(3)]
    received = time.time_ns()
    messages = [pending_message(v, tenant, received) for v in [*values, values[1]]]
    assert insert_messages(store, messages) == [1, 1, 1, 1]
    count = "SELECT count() FROM spans FINAL WHERE Tenant = {t:String}"
    assert store.query(count, {"t": tenant}).rows[0][0] == 3


def test_removing_either_side_fails_the_parity_check(
    store: ClientStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An insert that declines every message fails the check (each decline counted by its
    reason); so does a Python decoder that is gone (its rows then lack the GenAI columns)."""
    values = _demo_values("genai", RedactionConfig())
    with monkeypatch.context() as patched:
        patched.setattr(otlp_insert, "_insert_readable", lambda _, messages: messages)
        expected = rf"decided 0 items .*{otlp_insert.REFUSED.reason}': {len(values)}"
        with pytest.raises(AssertionError, match=expected):
            _compare(store, values, min_decided=len(values))
    monkeypatch.setattr(otlp, "genai_fields", lambda name, attributes: GenAIFields())
    with pytest.raises(AssertionError, match=r"(?s)fields differ.*GenAIOperation"):
        _compare(store, values, min_decided=len(values))
