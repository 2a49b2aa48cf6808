"""Synthetic agent turns at chosen times, sent with the official OTel SDK exporter, for the
monitor tests: each turn is an `invoke_agent` span (with the user's message and the answer,
and its slice attribute) over one or more `execute_tool` spans, the first of which fails
when asked. Times are the turns' own (start and end set explicitly), so a test lays out an
hour of traffic, or last week's, in seconds; the monitors bucket turns by their end.

`judged(score)` writes a verdict into the user's message that `ScoreJudge` (an answer
function for the OpenAI stand-in) gives back for the faithfulness rubric: a scripted judge
whose scores the test chooses per turn.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode
from pathgrade.schemas import genai

from tests.support.openai_standin import request_schema

SECOND = 1_000_000_000
VERDICT = re.compile(r"\[verdict (\d)\]")


@dataclass(frozen=True)
class Turn:
    """One agent turn of `service` ending at `end_s` (Unix seconds)."""

    service: str
    end_s: float
    tool_error: bool = False
    tool_calls: int = 1
    intent: str = "status"
    verdict: int | None = None  # the stand-in judge's faithfulness score (1-4) for it


def every(
    service: str, start_s: float, end_s: float, per_s: float, **fields: Any
) -> Iterator[Turn]:
    """Turns of `service` evenly spread over [start_s, end_s), `per_s` a second."""
    count = round((end_s - start_s) * per_s)
    for index in range(count):
        yield Turn(service, start_s + (index + 0.5) / per_s, **fields)


def with_errors(turns: Iterable[Turn], rate_at: Any, seed: int) -> list[Turn]:
    """`turns`, each with a failed tool call with probability `rate_at(turn.end_s)`."""
    rng = random.Random(seed)
    return [
        Turn(t.service, t.end_s, rng.random() < rate_at(t.end_s), t.tool_calls, t.intent,
             t.verdict)
        for t in turns
    ]  # fmt: skip


def send_turns(endpoint: str, turns: Iterable[Turn]) -> int:
    """Send `turns` to the OTLP/HTTP traces `endpoint` (one trace each); returns how many."""
    providers: dict[str, TracerProvider] = {}
    sent = 0
    for number, turn in enumerate(turns):
        provider = providers.get(turn.service)
        if provider is None:
            provider = providers[turn.service] = TracerProvider(
                resource=Resource.create({"service.name": turn.service})
            )
            exporter = OTLPSpanExporter(endpoint=endpoint)
            provider.add_span_processor(
                BatchSpanProcessor(exporter, max_queue_size=100_000, max_export_batch_size=1000)
            )
        _emit(provider.get_tracer("monitor-traffic"), turn, number)
        sent += 1
    for provider in providers.values():
        provider.force_flush()
        provider.shutdown()
    return sent


def _emit(tracer: trace.Tracer, turn: Turn, number: int) -> None:
    end = int(turn.end_s * SECOND)
    start = end - SECOND // 2
    question = f"Where is order {number}?" + (
        f" [verdict {turn.verdict}]" if turn.verdict is not None else ""
    )
    root = tracer.start_span(
        f"invoke_agent {turn.service}", start_time=start,
        attributes={
            genai.OPERATION_NAME: "invoke_agent", genai.AGENT_NAME: f"{turn.service}-agent",
            "app.intent": turn.intent,
            genai.INPUT_MESSAGES: json.dumps([{"role": "user", "content": question}]),
            genai.OUTPUT_MESSAGES: json.dumps(
                [{"role": "assistant", "content": f"Order {number} has shipped."}]
            ),
        },
    )  # fmt: skip
    context = trace.set_span_in_context(root)
    for call in range(turn.tool_calls):
        at = start + (call + 1) * SECOND // 10
        tool = tracer.start_span(
            "execute_tool lookup_order", context=context, start_time=at,
            attributes={
                genai.OPERATION_NAME: "execute_tool", genai.TOOL_NAME: "lookup_order",
                genai.TOOL_CALL_ARGUMENTS: json.dumps({"order": number}),
                genai.TOOL_CALL_RESULT: json.dumps({"status": "shipped"}),
            },
        )  # fmt: skip
        if turn.tool_error and call == 0:
            tool.set_status(Status(StatusCode.ERROR, "timeout"))
            tool.set_attribute(genai.ERROR_TYPE, "timeout")
        tool.end(end_time=at + SECOND // 20)
    root.end(end_time=end)


class ScoreJudge:
    """An answer function for the OpenAI stand-in: the verdict written in the prompt's user
    message (`Turn.verdict`), else the best score; counts what it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        self.asked += 1
        schema = request_schema(request) or {}
        prompt = json.dumps(request.get("messages"))
        found = VERDICT.search(prompt)
        maximum = schema.get("properties", {}).get("score", {}).get("maximum", 4)
        score = int(found.group(1)) if found else maximum
        return {"score": score, "explanation": f"scripted verdict {score}"}
