"""The application around a framework's two agents (triage and billing), as a real service
writes it: the official OpenTelemetry SDK and OTLP exporter, a span processor that stamps
the signed-in user of the session on every span it starts (`user.id`), the stories'
tools, one trace per story. It never sets a `pathgrade.*` attribute: every other span
attribute is the framework's or its instrumentation's.

Each framework module (`openai_agents_app`, `langgraph_app`) builds its agents and runs
one story; it calls `Session.handed_off` when control passes to the receiving agent,
where the session switches to the identity the story runs the receiver under (none: the
session was lost on the way; another: a stale session).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.integration.handoffs.stories import CUSTOMER, STORIES, Story, tool_result

IDENTITY_KEY = "user.id"


def get_account(customer_id: str) -> str:
    """Read a customer's account: plan and balance.

    Args:
        customer_id: The customer's id.
    """
    return tool_result("get_account", {"customer_id": customer_id})


def open_ticket(customer_id: str, reason: str) -> str:
    """Open a support ticket for the customer.

    Args:
        customer_id: The customer's id.
        reason: Why the ticket is opened.
    """
    return tool_result("open_ticket", {"customer_id": customer_id, "reason": reason})


def close_ticket(customer_id: str) -> str:
    """Close the customer's open support ticket.

    Args:
        customer_id: The customer's id.
    """
    return tool_result("close_ticket", {"customer_id": customer_id})


TOOLS: tuple[Callable[..., str], ...] = (get_account, open_ticket, close_ticket)


class Recorder(SpanProcessor):
    """Keeps every ended span, so the app can say which trace each story made."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class Session:
    """The session of one story's run: the signed-in user, switched once at the first
    hand-off to the identity the story runs the receiving agent under."""

    current: Session | None = None
    """The session whose story is running (the stamping processor reads it)."""

    def __init__(self, story: Story) -> None:
        self.story = story
        self.identity: str | None = CUSTOMER
        self.switched = False

    def handed_off(self) -> None:
        """Control passed to the receiving agent (the framework's hook calls this)."""
        if not self.switched:
            self.switched = True
            self.identity = self.story.identity_at_handoff


class SessionStamp(SpanProcessor):
    """Stamps the running session's user on every span as it starts."""

    def on_start(self, span: Span, parent_context: context.Context | None = None) -> None:
        session = Session.current
        if session is not None and session.identity is not None:
            span.set_attribute(IDENTITY_KEY, session.identity)


RunStory = Callable[[Story, Session, str], str]
"""Runs one story's turn with the framework (model base URL given), returns the answer."""


def main(
    run_story: RunStory,
    framework: str,
    instrument: Callable[[TracerProvider], None],
    argv: list[str] | None = None,
) -> int:
    """Run every story through the framework (its instrumentation turned on by
    `instrument`), export to `--otlp`, write what ran."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--otlp", required=True, help="OTLP/HTTP base URL of the collector")
    parser.add_argument("--model-url", required=True, help="the scripted model's base URL")
    parser.add_argument("--service", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    provider = TracerProvider(resource=Resource.create({"service.name": args.service}))
    provider.add_span_processor(SessionStamp())
    recorder = Recorder()
    provider.add_span_processor(recorder)
    exporter = OTLPSpanExporter(endpoint=args.otlp.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    trace.set_tracer_provider(provider)
    instrument(provider)
    done: dict[str, dict[str, Any]] = {}
    for story in STORIES.values():
        before = len(recorder.spans)
        Session.current = session = Session(story)
        try:
            answer = run_story(story, session, args.model_url)
        finally:
            Session.current = None
        spans = recorder.spans[before:]
        traces = sorted({f"{s.context.trace_id:032x}" for s in spans})
        done[story.name] = {"traces": traces, "answer": answer, "spans": len(spans)}
    provider.force_flush()
    with open(args.out, "w", encoding="utf-8") as out:
        json.dump({"framework": framework, "stories": done}, out, indent=1)
    provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit("run a framework's module: openai_agents_app or langgraph_app")
