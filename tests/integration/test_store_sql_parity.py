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
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.store import otlp_insert
from pathgrade.batch_plane.store.client import ClientStore, embedded_dsn, open_client_store
from pathgrade.batch_plane.store.genai_sql import FLATTENED, KIND_NOT_ASCII, NOT_COUNT, NOT_TEXT
from pathgrade.batch_plane.store.otlp_insert import (
    EVENT_OUTSIDE,
    LINK_OUTSIDE,
    RESOURCE_ATTRIBUTES,
    SERVICE_NOT_TEXT,
    SPAN_ATTRIBUTES,
    START_PAST_RANGE,
    insert_messages,
    pending_message,
)
from pathgrade.batch_plane.store.span_rows import SPAN_COLUMNS, span_row
from pathgrade.collector.facts import FactMaker
from pathgrade.collector.grouping import group_by_trace
from pathgrade.collector.redact import CAPTURE_ALL_TOOLS, RedactionConfig, Redactor
from pathgrade.content import otlp
from pathgrade.content.fingerprints import SECRET_BYTES, FactSecret
from pathgrade.content.otlp import decode_spans_message
from pathgrade.content.pii import PiiScanner
from pathgrade.schemas.decline import Declined, declined
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


def _compare(store: ClientStore, values: list[bytes], min_decided: int = 0) -> dict[str, int]:
    """Store `values` both ways (the SQL insert's answers counted by the parity harness);
    assert equal rows, and at least `min_decided` messages inserted by the SQL; returns
    how many messages the SQL path declined (left to Python) by reason."""
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
    return dict(parity.declined)


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
    assert _compare(store, values, min_decided=len(values)) == {}


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_with_content_captured(store: ClientStore, flavor: str) -> None:
    capture = RedactionConfig(capture_tools=[CAPTURE_ALL_TOOLS], capture_messages=True)
    values = _demo_values(flavor, capture)
    assert _has_facts(values)
    left = _compare(store, values)
    if flavor != "genai":  # flattened messages: the Python decoder rebuilds them
        assert left.get(FLATTENED.reason, 0) > 0


@pytest.mark.parametrize("flavor", ["genai", "openinference", "openllmetry"])
def test_demo_traffic_raw(store: ClientStore, flavor: str) -> None:
    left = _compare(store, _demo_values(flavor, None))
    if flavor != "genai":
        assert left.get(FLATTENED.reason, 0) > 0


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

# (case, attributes, extra keyword arguments of _one_span, what the SQL path declines it
# for: None when it keeps it)
EDGE_CASES: list[tuple[str, list[tuple[str, Any]], dict[str, Any], Declined | None]] = [
    ("genai chat", [("gen_ai.operation.name", "chat"), ("gen_ai.request.model", "m"),
                    ("gen_ai.usage.input_tokens", 3), ("gen_ai.usage.output_tokens", 4),
                    ("gen_ai.response.finish_reasons", ["stop"])], {}, None),
    ("deprecated aliases", [("gen_ai.system", "openai"), ("gen_ai.usage.prompt_tokens", "12"),
                            ("gen_ai.usage.completion_tokens", 0)], {"name": "chat gpt"}, None),
    ("span name target", [], {"name": "execute_tool lookup"}, None),
    ("span name other op", [("gen_ai.operation.name", "chat")], {"name": "execute_tool x"}, None),
    ("name without target", [], {"name": "invoke_agent"}, None),
    ("openinference kinds", [("openinference.span.kind", "tool"), ("tool.name", "t"),
                             ("input.value", "{}"), ("output.value", "ok")], {}, None),
    ("openinference unknown", [("openinference.span.kind", "UNKNOWN"),
                               ("traceloop.span.kind", "tool")], {}, None),
    ("openinference other", [("openinference.span.kind", "weird")], {}, None),
    ("openinference llm value", [("openinference.span.kind", "LLM"),
                                 ("input.value", "hi"), ("output.value", "yo")], {}, None),
    ("traceloop agent", [("traceloop.span.kind", "workflow"),
                         ("traceloop.entity.name", "flow")], {"name": "invoke_agent x"}, None),
    ("traceloop tool", [("traceloop.span.kind", "tool"), ("traceloop.entity.name", "t"),
                        ("traceloop.entity.input", "{\"a\":1}")], {}, None),
    ("request type", [("llm.request.type", "completion"), ("llm.usage.total_tokens", 9)],
     {}, None),
    ("legacy prompt", [("llm.request.type", "chat"), ("gen_ai.prompt", "p"),
                       ("gen_ai.completion", "c")], {}, None),
    ("error status", [], {"status": 2}, None),
    ("error type", [("error.type", "timeout")], {"status": 2}, None),
    ("eval context", [("pathgrade.run.id", "r"), ("pathgrade.replay.index", 4),
                      ("pathgrade.dataset.item_id", "i")], {}, None),
    ("replay too large", [("pathgrade.replay.index", 2**32)], {}, None),
    ("negative tokens", [("gen_ai.usage.input_tokens", -1),
                         ("gen_ai.usage.output_tokens", 2)], {}, None),
    ("token sum overflows", [("gen_ai.usage.input_tokens", 2**63 - 1),
                             ("gen_ai.usage.output_tokens", 2**63 - 1)], {}, None),
    ("token sum past UInt64", [("gen_ai.usage.input_tokens", "9999999999999999999"),
                               ("gen_ai.usage.output_tokens", "9999999999999999999")], {}, None),
    ("token sum at UInt64's end", [("gen_ai.usage.input_tokens", "9223372036854775808"),
                                   ("gen_ai.usage.output_tokens", 2**63 - 1)], {}, None),
    ("scalars", [("b", True), ("i", -7), ("f", 0.5), ("z", 0.0), ("g", 3.0), ("by", b"\x00\xff"),
                 ("none", None), ("empty", "")], {}, None),
    ("arrays", [("a", ["x", 1, True, b"ab", None]), ("e", [])], {}, None),
    ("content keys", [("gen_ai.input.messages", "[]"), ("llm.prompts.0", "p"), ("user.id", "u")],
     {}, None),
    ("content event", [], {"events": [("gen_ai.user.message", [("content", "hi")]),
                                      ("exception", [("exception.type", "E"),
                                                     ("gen_ai.prompt", "p")])]}, None),
    ("unicode text", [("k", "é ✓ \n"), ("gen_ai.tool.name", "🔧")], {}, None),
    ("one key in two events", [], {"events": [("a", [("k", "1")]), ("b", [("k", 2)])]}, None),
    ("link values", [], {"link": [("n", 3), ("a", ["x", 1])]}, None),
    # outside what the SQL reads: the Python path stores them
    ("nested twice", [("a", [["x"]])], {}, SPAN_ATTRIBUTES),
    ("map value", [("m", {"k": "v"})], {}, SPAN_ATTRIBUTES),
    ("float text", [("f", 1e16)], {}, SPAN_ATTRIBUTES),
    ("tiny float", [("f", 1e-7)], {}, SPAN_ATTRIBUTES),
    ("negative zero", [("f", -0.0)], {}, SPAN_ATTRIBUTES),
    ("nan", [("f", float("nan"))], {}, SPAN_ATTRIBUTES),
    ("float in array", [("a", [0.5])], {}, SPAN_ATTRIBUTES),
    ("escaped text in array", [("a", ['say "hi"'])], {}, SPAN_ATTRIBUTES),
    ("non-ascii in array", [("a", ["é"])], {}, SPAN_ATTRIBUTES),
    ("duplicate keys", [("k", "a"), ("k", "b")], {}, SPAN_ATTRIBUTES),
    ("duplicate resource keys", [], {"resource": [("service.name", "a"), ("service.name", "b")]},
     RESOURCE_ATTRIBUTES),
    ("service name not text", [], {"resource": [("service.name", 5)]}, SERVICE_NOT_TEXT),
    ("duplicate event keys", [], {"events": [("e", [("k", "a"), ("k", "b")])]}, EVENT_OUTSIDE),
    ("map value in an event", [], {"events": [("e", [("m", {"k": "v"})])]}, EVENT_OUTSIDE),
    ("duplicate link keys", [], {"link": [("k", "a"), ("k", "b")]}, LINK_OUTSIDE),
    ("float text in a link", [], {"link": [("f", 1e16)]}, LINK_OUTSIDE),
    ("flattened prompt", [("llm.request.type", "chat"), ("gen_ai.prompt.0.role", "user"),
                          ("gen_ai.prompt.0.content", "hi")], {}, FLATTENED),
    ("flattened openinference", [("openinference.span.kind", "LLM"),
                                 ("llm.input_messages.0.message.role", "user"),
                                 ("llm.input_messages.3.0.message.content", "x")], {}, FLATTENED),
    ("index 3.0", [("llm.request.type", "chat"), ("gen_ai.completion.3.0.content", "c")],
     {}, FLATTENED),
    ("text key not text", [("gen_ai.request.model", 5)], {}, NOT_TEXT),
    ("token count as float", [("gen_ai.usage.input_tokens", 12.0)], {}, NOT_COUNT),
    ("token count as decimal text", [("gen_ai.usage.input_tokens", "12.0")], {}, NOT_COUNT),
    ("token count with blanks", [("gen_ai.usage.input_tokens", " 12")], {}, NOT_COUNT),
    ("non-ascii span kind", [("openinference.span.kind", "ß")], {}, KIND_NOT_ASCII),
    ("start past the store's range", [], {"start": 2**63}, START_PAST_RANGE),
]  # fmt: skip


def test_edge_cases_inside_the_sql_stay_on_its_path(store: ClientStore) -> None:
    """One batch of every case the SQL reads: its rows equal the Python decoder's."""
    values = [_one_span(a, **o) for _, a, o, refusal in EDGE_CASES if refusal is None]
    assert _compare(store, values, min_decided=len(values)) == {}


@pytest.mark.parametrize(
    ("attributes", "options", "refusal"),
    [pytest.param(a, o, r, id=case) for case, a, o, r in EDGE_CASES if r is not None],
)
def test_edge_cases_outside_the_sql_take_the_python_path_naming_why(
    store: ClientStore, attributes: list[tuple[str, Any]], options: dict[str, Any],
    refusal: Declined,
) -> None:  # fmt: skip
    assert _compare(store, [_one_span(attributes, **options)]) == {refusal.reason: 1}


def test_refused_messages_of_one_batch_each_name_why(store: ClientStore) -> None:
    """The store names the refused messages of a batch and their refusals in one
    statement (chDB); the others stay on the SQL path."""
    outside = [(_one_span(a, **o), r) for _, a, o, r in EDGE_CASES if r not in (None, FLATTENED)]
    values = [_one_span([("k", f"v{i}")]) for i in range(3)] + [v for v, _ in outside]
    assert _compare(store, values, min_decided=3) == dict(Counter(r.reason for _, r in outside))


def test_a_refused_message_leaves_the_others_of_its_batch_on_the_sql_path(
    store: ClientStore,
) -> None:
    values = [_one_span([("k", f"v{i}")]) for i in range(6)]
    values.insert(3, _one_span([("a", [["deep"]])]))
    assert _compare(store, values) == {SPAN_ATTRIBUTES.reason: 1}


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
        patched.setattr(
            otlp_insert, "_insert_readable",
            lambda _, messages: dict.fromkeys(map(id, messages), SPAN_ATTRIBUTES),
        )  # fmt: skip
        expected = rf"decided 0 items .*{SPAN_ATTRIBUTES.reason}': {len(values)}"
        with pytest.raises(AssertionError, match=expected):
            _compare(store, values, min_decided=len(values))
    monkeypatch.setattr(otlp, "genai_fields", lambda name, attributes: GenAIFields())
    with pytest.raises(AssertionError, match=r"(?s)fields differ.*GenAIOperation"):
        _compare(store, values, min_decided=len(values))
