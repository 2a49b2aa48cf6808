"""The application around each framework's agent, as a real service writes it: the
official OpenTelemetry SDK and OTLP exporter, the story's tools, an approval gate that
records its decisions as `gen_ai.tool.call.decision` events, and the trace shapes (an
HTTP server span whose parent is remote, no server span, three runs in one trace, one
trace per conversation). It never sets a `pathgrade.*` attribute: every span but the
app's server and session spans is the framework's or its instrumentation's.

Runs inside the framework's own virtualenv (pathgrade is not installed there):

    python -m tests.integration.frameworks.adapters.<name> --otlp URL --model-url URL \
        --service NAME --out results.json
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Protocol

from opentelemetry import baggage, context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.processor.baggage import ALLOW_ALL_BAGGAGE_KEYS, BaggageSpanProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tests.integration.frameworks.stories import (
    CUSTOMER,
    IRREVERSIBLE,
    SHAPES,
    STORIES,
    Step,
    Story,
    tool_result,
)

DECISION_EVENT = "gen_ai.tool.call.decision"
"""The tool-call decision event proposed to the GenAI conventions (pull request 535)."""
DECISION_OUTCOME = "gen_ai.tool.call.decision.outcome"
TURN_PAUSE_S = 1.5
"""Pause between the turns of a conversation trace: longer than the realtime plane's
quiet window, so each turn can be graded as it ends, before the session's span ends."""


class Session(Protocol):
    """One conversation with the framework's agent: `ask` runs one agent turn and keeps
    the history for the next."""

    def ask(self, text: str) -> str: ...


@dataclass
class Framework:
    """What an adapter tells the app: its name, the distributions whose versions the matrix
    reports, its instrumentation, and how to start a conversation."""

    name: str
    distributions: tuple[str, ...]
    instrumentation: str
    instrument: Callable[[TracerProvider], None]
    session: Callable[[str], Session]
    """Called with the scripted model's base URL (`.../v1`)."""
    notes: tuple[str, ...] = ()
    current_span: Callable[[], Span | None] = trace.get_current_span
    """How the app's code reaches the span of the tool it runs in: the OpenTelemetry
    context's current span, else the instrumentation's own accessor where it makes no span
    current while a tool runs (None: it knows no run)."""


def dotted_name(function: Callable[..., Any]) -> str:
    """A function's module and name (the matrix's doc names the accessor the app calls)."""
    return f"{function.__module__}.{function.__qualname__}"


@dataclass
class Run:
    """One agent run of a trace: its story and the spans it made."""

    story: str
    span_ids: list[str] = field(default_factory=list)
    answer: str = ""


class Recorder(SpanProcessor):
    """Keeps every ended span, so the app can say which spans each run made and what the
    framework emits."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


# The run in progress: its story, how often each tool was called (for the scripted
# results) and how the app reaches the tool's span (the framework's `current_span`); the
# tools read it.
_current: dict[str, Any] = {"story": None, "calls": Counter(), "span": trace.get_current_span}


def _tool(name: str, arguments: dict[str, Any]) -> str:
    story: Story | None = _current["story"]
    assert story is not None, f"{name} called outside a run"
    step = Step(story, sum(_current["calls"].values()), None)
    _current["calls"][name] += 1
    if story.decision and name in IRREVERSIBLE:
        gate(name, step.call_id, story.decision)
    return tool_result(story, name, arguments, _current["calls"][name])


def gate(tool: str, call_id: str, outcome: str) -> None:
    """The app's approval gate: records its decision about the call `call_id` (the id the
    model gave it) on the tool's span as the framework's `current_span` reaches it (the
    span current in the tool where the framework runs the tool in its tool span's context),
    else on the span current in the OpenTelemetry context."""
    attributes = {
        DECISION_OUTCOME: outcome,
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
    }
    span = _current["span"]() or trace.get_current_span()
    span.add_event(DECISION_EVENT, attributes)


def get_account(customer_id: str) -> str:
    """Read a customer's account: plan and card on file.

    Args:
        customer_id: The customer's id.
    """
    return _tool("get_account", {"customer_id": customer_id})


def lookup_order(customer_id: str, order_id: str) -> str:
    """Look up the status of an order.

    Args:
        customer_id: The customer's id.
        order_id: The order's id.
    """
    return _tool("lookup_order", {"customer_id": customer_id, "order_id": order_id})


def search_kb(query: str) -> str:
    """Search the help centre's articles.

    Args:
        query: What to search for.
    """
    return _tool("search_kb", {"query": query})


def change_plan(customer_id: str, plan: str) -> str:
    """Change a customer's plan.

    Args:
        customer_id: The customer's id.
        plan: The new plan.
    """
    return _tool("change_plan", {"customer_id": customer_id, "plan": plan})


def open_dispute(customer_id: str, reason: str) -> str:
    """Open a billing dispute ticket.

    Args:
        customer_id: The customer's id.
        reason: Why the customer disputes the bill.
    """
    return _tool("open_dispute", {"customer_id": customer_id, "reason": reason})


def reset_equipment(customer_id: str) -> str:
    """Reset the customer's network equipment (cannot be undone).

    Args:
        customer_id: The customer's id.
    """
    return _tool("reset_equipment", {"customer_id": customer_id})


TOOLS: tuple[Callable[..., str], ...] = (
    get_account,
    lookup_order,
    search_kb,
    change_plan,
    open_dispute,
    reset_equipment,
)
INSTRUCTIONS = "You are the support agent of a telecom company. Use the tools."


def remote_parent() -> context.Context:
    """The context an instrumented web server builds from an incoming W3C traceparent:
    an upstream service's span, marked remote."""
    header = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    return TraceContextTextMapPropagator().extract({"traceparent": header})


class App:
    """Runs the shapes' traces through one framework and records what happened."""

    def __init__(self, framework: Framework, model_url: str, provider: TracerProvider) -> None:
        self.framework = framework
        self.model_url = model_url
        _current["span"] = framework.current_span
        self.recorder = Recorder()
        provider.add_span_processor(self.recorder)
        self.tracer = provider.get_tracer("support-app")

    def run(self, session: Session, story_name: str) -> Run:
        story = STORIES[story_name]
        _current.update(story=story, calls=Counter())
        before = len(self.recorder.spans)
        answer = session.ask(story.user_text)
        _current["story"] = None
        spans = self.recorder.spans[before:]
        return Run(story_name, sorted(f"{s.context.span_id:016x}" for s in spans), answer)

    def server_span(self, stories: list[str]) -> list[Run]:
        """The runs inside one `POST /chat` server span whose parent is remote."""
        attributes = {
            "http.request.method": "POST",
            "url.path": "/chat",
            "http.route": "/chat",
            "user.id": CUSTOMER,
        }
        with self.tracer.start_as_current_span(
            "POST /chat", context=remote_parent(), kind=SpanKind.SERVER, attributes=attributes
        ):
            return [self.run(self.framework.session(self.model_url), s) for s in stories]

    def no_server_span(self, stories: list[str]) -> list[Run]:
        """The runs with no span of the app's: the identity travels as baggage, which the
        official baggage span processor copies onto the framework's spans."""
        token = context.attach(baggage.set_baggage("user.id", CUSTOMER))
        try:
            return [self.run(self.framework.session(self.model_url), s) for s in stories]
        finally:
            context.detach(token)

    def conversation(self, stories: list[str]) -> list[Run]:
        """One trace per session: the turns of one conversation under a session span."""
        attributes = {"user.id": CUSTOMER, "gen_ai.conversation.id": secrets.token_hex(8)}
        session = self.framework.session(self.model_url)
        runs = []
        with self.tracer.start_as_current_span("support session", attributes=attributes):
            for story in stories:
                runs.append(self.run(session, story))
                time.sleep(TURN_PAUSE_S)
        return runs

    def _runner(self, shape: str) -> Callable[[list[str]], list[Run]]:
        runners = {
            "server_span": self.server_span,
            "no_server_span": self.no_server_span,
            "three_runs": self.server_span,
            "conversation": self.conversation,
        }
        return runners[shape]

    def shapes(self) -> dict[str, list[dict[str, Any]]]:
        """Every shape's traces: trace id and runs."""
        done: dict[str, list[dict[str, Any]]] = {}
        for shape, traces in SHAPES.items():
            done[shape] = []
            for stories in traces:
                runs = self._runner(shape)(stories)
                trace_ids = {
                    f"{s.context.trace_id:032x}"
                    for s in self.recorder.spans
                    if f"{s.context.span_id:016x}" in set(runs[0].span_ids)
                }
                done[shape].append(
                    {
                        "trace_id": trace_ids.pop() if trace_ids else "",
                        "runs": [r.__dict__ for r in runs],
                    }
                )
        return done


def emitted(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    """What the framework emits: per kind of span (GenAI operation, else OpenInference or
    OpenLLMetry span kind, else the span's name), how many, the attribute keys (indexes
    folded to N) and the event names."""
    kinds: dict[str, dict[str, Any]] = {}
    for span in spans:
        attributes = dict(span.attributes or {})
        kind = str(
            attributes.get("gen_ai.operation.name")
            or attributes.get("openinference.span.kind")
            or attributes.get("traceloop.span.kind")
            or re.sub(r"\s.*", "", span.name)
        )
        entry = kinds.setdefault(
            kind, {"kind": kind, "count": 0, "names": set(), "attributes": set(), "events": set()}
        )
        entry["count"] += 1
        entry["names"].add(span.name)
        entry["attributes"] |= {re.sub(r"\.\d+(?=\.|$)", ".N", k) for k in attributes}
        entry["events"] |= {e.name for e in span.events}
    return [
        {
            **e,
            "names": sorted(e["names"])[:6],
            "attributes": sorted(e["attributes"]),
            "events": sorted(e["events"]),
        }
        for e in sorted(kinds.values(), key=lambda e: -e["count"])
    ]


def versions(distributions: tuple[str, ...]) -> dict[str, str]:
    return {name: metadata.version(name) for name in distributions}


def main(framework: Framework, argv: list[str] | None = None) -> int:
    """Run every shape through `framework`, export to `--otlp`, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otlp", required=True, help="OTLP/HTTP base URL of the collector")
    parser.add_argument("--model-url", required=True, help="the scripted model's base URL")
    parser.add_argument("--service", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    provider.add_span_processor(BaggageSpanProcessor(ALLOW_ALL_BAGGAGE_KEYS))
    exporter = OTLPSpanExporter(endpoint=args.otlp.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    trace.set_tracer_provider(provider)
    framework.instrument(provider)
    app = App(framework, args.model_url, provider)
    started = time.monotonic()
    shapes = app.shapes()
    provider.force_flush()
    record = {
        "framework": framework.name,
        "versions": versions(framework.distributions),
        "instrumentation": framework.instrumentation,
        "notes": list(framework.notes),
        "current_span": ""
        if framework.current_span is trace.get_current_span
        else dotted_name(framework.current_span),
        "python": sys.version.split()[0],
        "run_s": round(time.monotonic() - started, 1),
        "shapes": shapes,
        "emitted": emitted(app.recorder.spans),
    }
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump(record, out, indent=1, default=str)
    provider.shutdown()
    return 0
