"""The demo sender: `send_demo_traces` emits planned turns through the official
OpenTelemetry SDK, with span times set explicitly, so generation never sleeps (unless a
rate is asked for); `run_demo` picks the OTLP exporter from a URL."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer, set_span_in_context

from pathgrade.batch_plane.agents.span_export import RecordingExporter, exporter_for_url
from pathgrade.demo.options import DEMO_DEFAULTS
from pathgrade.demo.scenarios import (
    NEGATIVE_FEEDBACK_SCENARIOS,
    ToolCall,
    TurnPlan,
    iter_turns,
    plan_turns,
)
from pathgrade.demo.writers import ConventionWriter, writer_for
from pathgrade.schemas.demo_marks import DEMO_RESOURCE_ATTRIBUTES
from pathgrade.schemas.genai import PG_FEEDBACK

SERVICE_NAMES = {
    "genai": "support-agent",
    "openinference": "support-agent-openinference",
    "openllmetry": "support-agent-openllmetry",
}
FLUSH_EVERY_SPANS = 2048  # force_flush this often: back-pressure instead of a full, dropping queue
QUEUE_SIZE = 2 * FLUSH_EVERY_SPANS

GAP_NS = 5_000_000  # agent bookkeeping between spans
MS = 1_000_000


def turn_duration_ns(turn: TurnPlan) -> int:
    """Wall time of a turn: every chat and tool call in sequence, with a gap around each."""
    busy_ms = sum(c.duration_ms + sum(t.duration_ms for t in c.tool_calls) for c in turn.chats)
    return busy_ms * MS + GAP_NS * (1 + len(turn.chats) + len(turn.tool_calls))


def emit_turn(tracer: Tracer, writer: ConventionWriter, turn: TurnPlan, end_ns: int) -> str:
    """Emit one turn as a trace ending at `end_ns`; returns its trace id (32 hex chars)."""
    name, attributes = writer.agent(turn)
    attributes["pathgrade.demo.scenario"] = turn.scenario
    attributes["pathgrade.turn.kind"] = turn.turn_kind
    if turn.confirmed_action:
        attributes["pathgrade.confirmed_action"] = turn.confirmed_action
    if turn.scenario in NEGATIVE_FEEDBACK_SCENARIOS:
        attributes[PG_FEEDBACK] = "negative"  # the customer's thumbs-down
    clock = end_ns - turn_duration_ns(turn)
    root = tracer.start_span(
        name, context=Context(), kind=SpanKind.INTERNAL, attributes=attributes, start_time=clock
    )
    parent = set_span_in_context(root)
    for chat in turn.chats:
        clock += GAP_NS
        name, attributes = writer.chat(turn, chat)
        span = tracer.start_span(
            name, parent, kind=SpanKind.CLIENT, attributes=attributes, start_time=clock
        )
        clock += chat.duration_ms * MS
        span.end(end_time=clock)
        for call in chat.tool_calls:
            clock = _emit_tool(tracer, writer, turn, call, parent, clock + GAP_NS)
    root.end(end_time=end_ns)
    return f"{root.get_span_context().trace_id:032x}"


def _emit_tool(
    tracer: Tracer,
    writer: ConventionWriter,
    turn: TurnPlan,
    call: ToolCall,
    parent: Context,
    start_ns: int,
) -> int:
    """Emit one tool span (with pathgrade's effect, key and error attributes); returns its end."""
    name, attributes = writer.tool(turn, call)
    attributes["pathgrade.tool.effect"] = call.effect
    if call.idempotency_key:
        attributes["pathgrade.idempotency_key"] = call.idempotency_key
    if call.error_type:
        attributes["error.type"] = call.error_type
    span = tracer.start_span(
        name, parent, kind=SpanKind.INTERNAL, attributes=attributes, start_time=start_ns
    )
    if call.error_type:
        span.set_status(Status(StatusCode.ERROR, f"{call.tool}: {call.error_type}"))
    end_ns = start_ns + call.duration_ms * MS
    span.end(end_time=end_ns)
    return end_ns


@dataclass(slots=True)
class DemoSummary:
    """What a demo run sent."""

    traces: int
    spans: int
    trace_ids: list[str]


class DemoExportError(RuntimeError):
    """The OTLP exporter reported that spans could not be delivered."""


def _check_run_arguments(traces: int, rate_per_s: float | None, stop: object) -> None:
    if traces < 0:
        raise ValueError(f"traces must be >= 0, got {traces}")
    if traces == 0 and stop is None:
        raise ValueError("traces=0 means 'until stopped' and needs a stop event")
    if rate_per_s is not None and rate_per_s <= 0:
        raise ValueError(f"rate_per_s must be > 0 when given, got {rate_per_s}")


def _pace(
    index: int, started: float, rate_per_s: float | None, stop: threading.Event | None
) -> None:
    """Wait until trace `index` is due at `rate_per_s` (no wait without a rate)."""
    if rate_per_s is None:
        return
    delay = started + index / rate_per_s - time.monotonic()
    if delay <= 0:
        return
    if stop is not None:
        stop.wait(delay)
    else:
        time.sleep(delay)


def send_demo_traces(
    exporter: SpanExporter,
    traces: int = DEMO_DEFAULTS.traces,
    seed: int = DEMO_DEFAULTS.seed,
    flavor: str = DEMO_DEFAULTS.flavor,
    rate_per_s: float | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
    destination: str = "the exporter",
    turns: Sequence[TurnPlan] | None = None,
) -> DemoSummary:
    """Emit planned turns (the seeded stream's first `traces`, all of them with 0, or the
    given `turns`) through a TracerProvider + BatchSpanProcessor into `exporter`, every
    span marked as demo data (`schemas.demo_marks`).

    Flushes, then shuts the provider (and the exporter) down. Raises DemoExportError when
    the exporter failed any batch; `destination` names the target in that message.
    """
    planned: Iterable[TurnPlan]
    if turns is not None:
        planned, traces = turns, len(turns)
    else:
        planned = iter_turns(seed) if traces == 0 else plan_turns(traces, seed)
    _check_run_arguments(traces, rate_per_s, stop)
    writer = writer_for(flavor)
    recorder = RecordingExporter(exporter)
    resource = Resource.create({"service.name": SERVICE_NAMES[flavor], **DEMO_RESOURCE_ATTRIBUTES})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(recorder, max_queue_size=QUEUE_SIZE))
    tracer = provider.get_tracer("pathgrade.demo")
    summary = DemoSummary(traces=0, spans=0, trace_ids=[])
    started, unflushed = time.monotonic(), 0
    try:
        for index, turn in enumerate(planned):
            _pace(index, started, rate_per_s, stop)
            if (stop is not None and stop.is_set()) or recorder.failed_batches:
                break
            summary.trace_ids.append(emit_turn(tracer, writer, turn, time.time_ns()))
            summary.traces += 1
            summary.spans += turn.span_count
            unflushed += turn.span_count
            if unflushed >= FLUSH_EVERY_SPANS:
                provider.force_flush()
                unflushed = 0
            if progress is not None:
                progress(summary.traces, traces)
        provider.force_flush()
    finally:
        provider.shutdown()
    if recorder.failed_batches:
        raise DemoExportError(
            f"exporting demo traces to {destination} failed: {recorder.failed_batches} "
            f"batch(es), {recorder.failed_spans} span(s) not accepted (is the collector up?)"
        )
    return summary


def run_demo(
    otlp_url: str,
    traces: int = 50,
    seed: int = 7,
    flavor: str = "genai",
    rate_per_s: float | None = None,
    stop: threading.Event | None = None,
    headers: dict[str, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DemoSummary:
    """Send `traces` seeded support-agent traces (0 = until `stop` is set) to an OTLP URL."""
    writer_for(flavor)  # fail on a bad flavor before opening a connection
    _check_run_arguments(traces, rate_per_s, stop)
    exporter = exporter_for_url(otlp_url, headers)
    return send_demo_traces(
        exporter, traces, seed, flavor, rate_per_s, stop, progress, destination=otlp_url
    )
