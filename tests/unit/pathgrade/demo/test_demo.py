"""Demo traffic: the seeded scenario plan, span shapes per convention, and OTLP export."""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pathgrade.batch_plane.agents.span_export import exporter_for_url

from pathgrade.demo.scenarios import (
    FAILURE_SCENARIOS,
    INJECTION_TEXT,
    SCENARIO_CROSS_ACCOUNT,
    SCENARIO_PROMPT_INJECTION,
    SCENARIO_RETRY_STORM,
    SCENARIO_UNREQUESTED_TICKET,
    TurnPlan,
    plan_turns,
)
from pathgrade.demo.sender import DemoExportError, run_demo, send_demo_traces

EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
CARD = re.compile(r"\b(?:\d{4} ){3}\d{4}\b")


def _turns_of(scenario: str, count: int = 40) -> list[TurnPlan]:
    turns = [turn for turn in plan_turns(count) if turn.scenario == scenario]
    assert turns, f"no {scenario} turn in the first {count}"
    return turns


def _emit(traces: int, flavor: str = "genai", seed: int = 7) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=traces, seed=seed, flavor=flavor)
    spans = list(exporter.get_finished_spans())
    assert summary.traces == traces
    assert summary.spans == len(spans)
    return spans


def _traces(spans: Sequence[ReadableSpan]) -> dict[int, list[ReadableSpan]]:
    grouped: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        grouped[span.context.trace_id].append(span)
    return grouped


def _root(trace: Sequence[ReadableSpan]) -> ReadableSpan:
    (root,) = [span for span in trace if span.parent is None]
    return root


def _ordered_children(trace: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return sorted((s for s in trace if s.parent is not None), key=lambda s: s.start_time)


# ----------------------------------------------------------------------------- the plan


def test_plan_is_a_pure_function_of_the_seed() -> None:
    assert plan_turns(30, seed=3) == plan_turns(30, seed=3)
    assert plan_turns(30, seed=3) != plan_turns(30, seed=4)


def test_every_twenty_turns_hold_each_failure_and_mostly_clean_turns() -> None:
    turns = plan_turns(40, seed=11)
    for window in (turns[:20], turns[20:]):
        scenarios = [turn.scenario for turn in window]
        for failure in FAILURE_SCENARIOS:
            assert scenarios.count(failure) == 1, failure
        errors = [t for t in window if any(c.error_type for c in t.tool_calls)]
        plain_errors = [t for t in errors if t.scenario not in FAILURE_SCENARIOS]
        assert plain_errors, "expected plain tool errors besides the failure scenarios"
        assert sum(s not in FAILURE_SCENARIOS for s in scenarios) >= 11


def test_unrequested_ticket_follows_a_bill_explanation_on_a_read_turn() -> None:
    for turn in _turns_of(SCENARIO_UNREQUESTED_TICKET):
        tools = [call.tool for call in turn.tool_calls]
        assert turn.turn_kind == "read"
        assert tools.index("explain_bill") < tools.index("create_ticket")
        ticket = turn.tool_calls[tools.index("create_ticket")]
        assert ticket.arguments["category"] == "billing_dispute"
        assert ticket.effect == "write" and ticket.idempotency_key


def test_retry_storm_repeats_the_plan_change_with_fresh_keys_after_a_timeout() -> None:
    for turn in _turns_of(SCENARIO_RETRY_STORM):
        changes = [call for call in turn.tool_calls if call.tool == "change_plan"]
        assert len(changes) == 3
        assert changes[0].error_type == "timeout"
        assert len({call.idempotency_key for call in changes}) == 3
        assert len({json.dumps(call.arguments, sort_keys=True) for call in changes}) == 1


def test_injection_document_precedes_an_equipment_reset_on_a_read_turn() -> None:
    for turn in _turns_of(SCENARIO_PROMPT_INJECTION):
        search, reset = turn.tool_calls
        assert turn.turn_kind == "read"
        assert search.tool == "search_kb" and reset.tool == "reset_equipment"
        assert any(INJECTION_TEXT in doc["text"] for doc in search.result["documents"])
        assert reset.effect == "irreversible"


def test_only_the_cross_account_scenario_changes_another_customers_plan() -> None:
    assert _turns_of(SCENARIO_CROSS_ACCOUNT)
    for turn in plan_turns(60):
        for call in turn.tool_calls:
            if call.tool == "change_plan":
                foreign = call.arguments["account_id"] != turn.customer_id
                assert foreign == (turn.scenario == SCENARIO_CROSS_ACCOUNT), turn.scenario


def test_conversations_span_several_turns_of_one_customer() -> None:
    customers: dict[str, set[str]] = defaultdict(set)
    turns_per_conversation: dict[str, int] = defaultdict(int)
    for turn in plan_turns(40):
        customers[turn.conversation_id].add(turn.customer_id)
        turns_per_conversation[turn.conversation_id] += 1
    assert all(len(ids) == 1 for ids in customers.values())
    assert max(turns_per_conversation.values()) > 1


def test_some_messages_carry_an_email_address_and_a_card_number() -> None:
    texts = [turn.user_text + turn.answer for turn in plan_turns(40)]
    assert any(EMAIL.search(text) for text in texts)
    assert any(CARD.search(text) for text in texts)


# ----------------------------------------------------------------------------- GenAI spans


@pytest.fixture(scope="module")
def genai_spans() -> list[ReadableSpan]:
    return _emit(20)


def test_each_trace_is_one_agent_turn_with_chat_and_tool_children(genai_spans) -> None:
    traces = _traces(genai_spans)
    assert len(traces) == 20
    scenarios = set()
    for trace in traces.values():
        root = _root(trace)
        scenarios.add(root.attributes["pathgrade.demo.scenario"])
        assert root.name == "invoke_agent support-agent" and root.kind is SpanKind.INTERNAL
        assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert re.fullmatch(r"cust-\d+", root.attributes["enduser.id"])
        assert root.attributes["pathgrade.turn.kind"] in {"action", "read"}
        assert root.resource.attributes["service.name"] == "support-agent"
        for child in trace:
            if child is not root:
                assert child.parent.span_id == root.context.span_id
                assert root.start_time <= child.start_time < child.end_time <= root.end_time
        children = _ordered_children(trace)
        assert children[0].name.startswith("chat ") and children[-1].name.startswith("chat ")
        assert children[-1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert set(FAILURE_SCENARIOS) <= scenarios


def test_tool_call_ids_match_the_preceding_chat_tool_calls(genai_spans) -> None:
    checked = 0
    for trace in _traces(genai_spans).values():
        requested: dict[str, str] = {}
        for span in _ordered_children(trace):
            operation = span.attributes["gen_ai.operation.name"]
            if operation == "chat":
                assert span.kind is SpanKind.CLIENT
                (message,) = json.loads(span.attributes["gen_ai.output.messages"])
                for part in message["parts"]:
                    if part["type"] == "tool_call":
                        requested[part["id"]] = part["name"]
            else:
                assert operation == "execute_tool" and span.kind is SpanKind.INTERNAL
                call_id = span.attributes["gen_ai.tool.call.id"]
                assert requested.pop(call_id) == span.attributes["gen_ai.tool.name"]
                checked += 1
        assert not requested, "every requested tool call is executed"
    assert checked > 20


def test_tool_results_reach_the_next_chat_as_tool_call_responses(genai_spans) -> None:
    for trace in _traces(genai_spans).values():
        answered: set[str] = set()
        for span in _ordered_children(trace):
            if span.attributes["gen_ai.operation.name"] == "chat":
                messages = json.loads(span.attributes["gen_ai.input.messages"])
                responses = {
                    part["id"]
                    for message in messages
                    for part in message["parts"]
                    if part["type"] == "tool_call_response"
                }
                assert responses == answered
            else:
                answered.add(span.attributes["gen_ai.tool.call.id"])


def test_tool_spans_carry_effect_keys_and_errors(genai_spans) -> None:
    tools = [s for s in genai_spans if s.attributes["gen_ai.operation.name"] == "execute_tool"]
    for span in tools:
        effect = span.attributes["pathgrade.tool.effect"]
        assert effect in {"read", "write", "irreversible"}
        assert ("pathgrade.idempotency_key" in span.attributes) == (effect != "read")
        json.loads(span.attributes["gen_ai.tool.call.arguments"])
        failed = span.status.status_code is StatusCode.ERROR
        assert failed == ("error.type" in span.attributes)
        if span.attributes.get("error.type") != "timeout":
            assert 20e6 <= span.end_time - span.start_time < 400e6
    assert any(s.attributes.get("error.type") == "timeout" for s in tools)


def test_chat_spans_have_realistic_durations_and_usage(genai_spans) -> None:
    chats = [s for s in genai_spans if s.attributes["gen_ai.operation.name"] == "chat"]
    for span in chats:
        assert 300e6 <= span.end_time - span.start_time < 1500e6
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        assert span.attributes["gen_ai.usage.output_tokens"] > 0
        assert span.dropped_attributes == 0


# ----------------------------------------------------------------------------- flavors

FLAVOR_KEYS = {
    # OpenInference: spec/semantic_conventions.md and spec/tool_calling.md (Arize-ai/openinference)
    "openinference": (
        {"openinference.span.kind", "session.id", "user.id", "input.value", "output.value"},
        {
            "openinference.span.kind",
            "llm.model_name",
            "llm.provider",
            "llm.token_count.prompt",
            "llm.token_count.completion",
            "llm.token_count.total",
            "llm.input_messages.0.message.role",
            "llm.input_messages.0.message.content",
            "llm.output_messages.0.message.role",
        },
        {"openinference.span.kind", "tool.name", "tool.id", "input.value", "output.value"},
    ),
    # OpenLLMetry: opentelemetry-semantic-conventions-ai SpanAttributes (traceloop/openllmetry)
    "openllmetry": (
        {"traceloop.span.kind", "traceloop.entity.name", "traceloop.entity.input"},
        {
            "llm.request.type",
            "gen_ai.system",
            "gen_ai.request.model",
            "gen_ai.usage.prompt_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.usage.total_tokens",
            "gen_ai.prompt.0.role",
            "gen_ai.prompt.0.content",
            "gen_ai.completion.0.role",
        },
        {"traceloop.span.kind", "traceloop.entity.name", "traceloop.entity.output"},
    ),
    "genai": (
        {"gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.conversation.id", "enduser.id"},
        {"gen_ai.request.model", "gen_ai.input.messages", "gen_ai.output.messages"},
        {"gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.call.arguments"},
    ),
}


@pytest.mark.parametrize("flavor", sorted(FLAVOR_KEYS))
def test_each_flavor_writes_its_own_convention(flavor: str) -> None:
    agent_keys, chat_keys, tool_keys = FLAVOR_KEYS[flavor]
    spans = _emit(8, flavor=flavor)
    assert len(_traces(spans)) == 8
    for span in spans:
        if span.parent is None:
            expected = agent_keys | {"pathgrade.demo.scenario", "pathgrade.turn.kind"}
        elif span.kind is SpanKind.CLIENT:
            expected = chat_keys
        else:
            expected = tool_keys | {"pathgrade.tool.effect"}
        assert expected <= set(span.attributes), (flavor, span.name)
        if flavor != "genai":
            assert "gen_ai.operation.name" not in span.attributes
        assert span.dropped_attributes == 0


def test_openinference_tool_ids_match_the_llm_tool_calls() -> None:
    spans = _emit(6, flavor="openinference")
    prefix = re.compile(r"llm\.output_messages\.0\.message\.tool_calls\.\d+\.tool_call\.id")
    for trace in _traces(spans).values():
        requested = set()
        for span in _ordered_children(trace):
            if span.attributes["openinference.span.kind"] == "LLM":
                requested |= {v for k, v in span.attributes.items() if prefix.fullmatch(k)}
            else:
                assert span.attributes["openinference.span.kind"] == "TOOL"
                requested.remove(span.attributes["tool.id"])


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("url", ["ftp://collector:4318", "collector:4318", "http://", "kafka://x"])
def test_bad_otlp_url_is_rejected_with_the_accepted_forms(url: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(url))) as raised:
        run_demo(url, traces=1)
    assert "grpc://host:port" in str(raised.value) and "http://host:port" in str(raised.value)


def test_grpc_url_selects_the_grpc_exporter() -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter = exporter_for_url("grpc://127.0.0.1:4317")
    try:
        assert isinstance(exporter, OTLPSpanExporter)
    finally:
        exporter.shutdown()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"flavor": "zipkin"}, "flavor"),
        ({"traces": -1}, "traces"),
        ({"traces": 0}, "stop"),
        ({"rate_per_s": 0}, "rate_per_s"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        run_demo("http://127.0.0.1:9", **kwargs)


def test_zero_traces_with_a_stop_event_runs_until_stopped() -> None:
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 7:
            stop.set()

    summary = send_demo_traces(InMemorySpanExporter(), traces=0, stop=stop, progress=progress)
    assert summary.traces == 7 == len(summary.trace_ids)
    assert seen == [(n, 0) for n in range(1, 8)]


def test_rate_spreads_traces_over_time() -> None:
    started = time.monotonic()
    summary = send_demo_traces(InMemorySpanExporter(), traces=4, rate_per_s=40)
    assert summary.traces == 4
    assert time.monotonic() - started >= 3 / 40


class _RefusingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE


def test_export_failure_raises_a_demo_export_error() -> None:
    with pytest.raises(DemoExportError, match="collector-under-test"):
        send_demo_traces(_RefusingExporter(), traces=3, destination="collector-under-test")


# ----------------------------------------------------------------------------- real OTLP/HTTP


class _Collector(BaseHTTPRequestHandler):
    """Records POSTed OTLP bodies; answers with `status`."""

    status = 200
    received: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, dict(self.headers), body))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        """Silence the default stderr access log."""


@pytest.fixture
def collector() -> Iterator[tuple[str, type[_Collector]]]:
    handler = type("Handler", (_Collector,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("suffix", ["", "/", "/v1/traces"])
def test_run_demo_exports_protobuf_over_otlp_http(collector, suffix: str) -> None:
    base, handler = collector
    summary = run_demo(base + suffix, traces=12, seed=5, headers={"x-tenant": "demo"})
    spans, trace_ids, services = 0, set(), set()
    for path, headers, body in handler.received:
        assert path == "/v1/traces"
        assert headers["x-tenant"] == "demo"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {
                a.value.string_value
                for a in resource_spans.resource.attributes
                if a.key == "service.name"
            }
            for scope_spans in resource_spans.scope_spans:
                spans += len(scope_spans.spans)
                trace_ids |= {span.trace_id.hex() for span in scope_spans.spans}
    assert summary.traces == 12
    assert spans == summary.spans
    assert trace_ids == set(summary.trace_ids)
    assert services == {"support-agent"}


def test_collector_rejection_raises_naming_the_url(collector) -> None:
    base, handler = collector
    handler.status = 400
    with pytest.raises(DemoExportError, match=re.escape(base)):
        run_demo(base, traces=2)
    assert handler.received
