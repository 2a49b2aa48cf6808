"""Agent adapters: baggage-carried evaluation context, callable and HTTP agents, loading."""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import baggage
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.batch_plane.agents.adapters import (
    AdapterError,
    AgentTurn,
    CallableAdapter,
    EvalContextSpanProcessor,
    HttpAdapter,
    TurnContext,
    load_adapter,
    pathgrade_context_attributes,
)
from pathgrade.schemas.model import EvalContext

CONTEXT = TurnContext(
    EvalContext(dataset_item_id="path-1", run_id="run-9", replay_index=2, variant_id="base"),
    extra={"pathgrade.edge.attempt": 1},
)
EXPECTED_ATTRIBUTES = {
    "pathgrade.run.id": "run-9",
    "pathgrade.dataset.item_id": "path-1",
    "pathgrade.replay.index": 2,
    "pathgrade.variant.id": "base",
    "pathgrade.edge.attempt": 1,
}


def test_turn_context_attributes_leave_empty_fields_out() -> None:
    assert CONTEXT.attributes() == EXPECTED_ATTRIBUTES
    assert TurnContext(EvalContext(run_id="r")).attributes() == {"pathgrade.run.id": "r"}


def test_callable_adapter_runs_the_agent_under_the_eval_baggage() -> None:
    seen: dict[str, Any] = {}

    def agent(state: dict, message: str, context: TurnContext) -> dict:
        seen["attributes"] = pathgrade_context_attributes()
        seen["state"], seen["message"] = state, message
        return {"response": "hi", "nodes": ["a"], "state": {"turn": 1}}

    turn = CallableAdapter(agent).respond({"seed": 3}, "hello", CONTEXT)
    assert turn == AgentTurn(response="hi", nodes=["a"], state={"turn": 1})
    assert seen == {"attributes": {**EXPECTED_ATTRIBUTES, "pathgrade.edge.attempt": "1"},
                    "state": {"seed": 3}, "message": "hello"}  # fmt: skip
    assert baggage.get_all() == {}  # detached again after the turn


def test_a_plain_string_answer_is_a_turn_and_garbage_is_an_error() -> None:
    assert CallableAdapter(lambda s, m, c: "ok").respond({}, "x", CONTEXT).response == "ok"
    with pytest.raises(AdapterError, match="nodes"):
        CallableAdapter(lambda s, m, c: {"nodes": "not-a-list"}, "bad").respond({}, "x", CONTEXT)


def test_span_processor_copies_the_context_onto_root_spans_only() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(EvalContextSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    def agent(state: dict, message: str, context: TurnContext) -> str:
        with (
            tracer.start_as_current_span("invoke_agent root"),
            tracer.start_as_current_span("invoke_agent node"),
        ):
            pass
        return "done"

    CallableAdapter(agent).respond({}, "hi", CONTEXT)
    spans = {span.name: dict(span.attributes or {}) for span in exporter.get_finished_spans()}
    assert spans["invoke_agent node"] == {}
    assert spans["invoke_agent root"]["pathgrade.run.id"] == "run-9"
    assert spans["invoke_agent root"]["pathgrade.replay.index"] == 2
    assert spans["invoke_agent root"]["pathgrade.edge.attempt"] == "1"


class _Agent(BaseHTTPRequestHandler):
    """A tiny agent over HTTP: records each turn, answers with a fixed AgentTurn."""

    turns: list[tuple[dict[str, Any], dict[str, str]]]
    paths: list[str]
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).turns.append((body, dict(self.headers)))
        type(self).paths.append(self.path)
        answer = json.dumps({"response": "hello", "nodes": ["a", "b"], "done": True}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def agent_server(status: int = 200) -> Iterator[tuple[str, type[_Agent]]]:
    handler = type("Agent", (_Agent,), {"turns": [], "paths": [], "status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/turn", handler
    finally:
        server.shutdown()
        server.server_close()


def test_http_adapter_posts_the_turn_with_baggage_and_reads_the_answer() -> None:
    with agent_server() as (url, agent):
        turn = HttpAdapter(url).respond({"seed": 1}, "hi", CONTEXT)
    assert turn.nodes == ["a", "b"] and turn.done and turn.response == "hello"
    body, headers = agent.turns[0]
    assert body == {"conversation_state": {"seed": 1}, "user_message": "hi",
                    "eval_context": EXPECTED_ATTRIBUTES}  # fmt: skip
    assert "pathgrade.run.id=run-9" in {k.lower(): v for k, v in headers.items()}["baggage"]


def test_http_adapter_errors_name_the_url() -> None:
    with agent_server(status=500) as (url, _), pytest.raises(AdapterError, match=url):
        HttpAdapter(url).respond({}, "hi", CONTEXT)


def test_load_adapter_from_a_file_a_module_a_class_and_a_url(tmp_path: Path) -> None:
    agent_file = tmp_path / "my_agent.py"
    agent_file.write_text(textwrap.dedent('''
        def answer(state, message, context):
            return {"response": message.upper()}

        class Bot:
            def respond(self, state, message, context):
                return "bot:" + message
    '''))  # fmt: skip
    assert load_adapter(f"{agent_file}:answer").respond({}, "hi", CONTEXT).response == "HI"
    assert load_adapter(f"{agent_file}:Bot").respond({}, "hi", CONTEXT).response == "bot:hi"
    module_agent = load_adapter("json:dumps")  # any importable callable
    assert isinstance(module_agent, CallableAdapter)
    assert isinstance(load_adapter("https://agent.example/turn"), HttpAdapter)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("no_colon_here", "expected 'module:function'"),
        ("json:no_such_function", "has no attribute 'no_such_function'"),
        ("no_such_module_xyz:f", "cannot import"),
        ("/nowhere/agent.py:f", "no Python file"),
        ("json:__doc__", "not callable"),
    ],
)
def test_load_adapter_errors_name_the_spec_and_reason(spec: str, reason: str) -> None:
    with pytest.raises(AdapterError, match=reason):
        load_adapter(spec)


def test_an_agents_end_state_method_gives_its_sandbox_under_the_eval_baggage(
    tmp_path: Path,
) -> None:
    agent_file = tmp_path / "stateful.py"
    agent_file.write_text(textwrap.dedent('''
        from opentelemetry import baggage

        class Shop:
            def respond(self, state, message, context):
                return "ok"

            def end_state(self, state, context):
                return {"attempt": baggage.get_baggage("pathgrade.run.id"), "seen": state}

        class Broken(Shop):
            def end_state(self, state, context):
                return ["not", "an", "object"]
    '''))  # fmt: skip
    shop = load_adapter(f"{agent_file}:Shop")
    assert shop.end_state({"turn": 1}, CONTEXT) == {"attempt": "run-9", "seen": {"turn": 1}}
    with pytest.raises(AdapterError, match="the end state is not a JSON object"):
        load_adapter(f"{agent_file}:Broken").end_state({}, CONTEXT)
    assert load_adapter("json:dumps").end_state({}, CONTEXT) is None  # a function has none


def test_http_adapter_posts_to_the_state_url_with_the_eval_context() -> None:
    with agent_server() as (url, agent):
        state_url = url.replace("/turn", "/state")
        adapter = load_adapter(url, state_url=state_url)
        state = adapter.end_state({"seed": 1}, CONTEXT)  # the stand-in answers any POST alike
        assert state == {"response": "hello", "nodes": ["a", "b"], "done": True}
        assert HttpAdapter(url).end_state({}, CONTEXT) is None  # no state URL, no request
    assert agent.paths == ["/state"]
    ((body, headers),) = agent.turns
    assert body == {"conversation_state": {"seed": 1}, "eval_context": EXPECTED_ATTRIBUTES}
    assert "pathgrade.run.id=run-9" in {k.lower(): v for k, v in headers.items()}["baggage"]
    with pytest.raises(AdapterError, match="a state URL goes with an http"):
        load_adapter("json:dumps", state_url=state_url)
