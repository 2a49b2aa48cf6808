"""One chat turn made by a real GenAI instrumentation, exported to an OTLP/HTTP endpoint: a
subprocess of the integration tests (an instrumentation reads its settings from the
environment once, and sets process-wide providers).

`python -m tests.support.instrumented_chat LIBRARY OPENAI_URL OTLP_URL [TOKEN]` runs an
`invoke_agent` span around one chat completion against OPENAI_URL (the stand-in,
`tests.support.openai_standin`), made by LIBRARY: `openai-v2` (the official OpenTelemetry
OpenAI instrumentation, `opentelemetry-instrumentation-openai-v2`, its content settings
from the environment) or `openllmetry` (OpenLLMetry's OpenAI instrumentation,
`opentelemetry-instrumentation-openai`, with its messages as events: `use_attributes=False`,
the per-message events `gen_ai.user.message` / `gen_ai.choice` whose body holds the
message). Spans go to OTLP_URL/v1/traces, log records to OTLP_URL/v1/logs (the
official OTLP/HTTP exporters, with `Authorization: Bearer TOKEN` when given); prints the
trace id.
"""

from __future__ import annotations

import sys

from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

QUESTION = "Where did my refund go?"


def main(library: str, openai_url: str, otlp_url: str, token: str = "") -> None:
    headers = {"authorization": f"Bearer {token}"} if token else None
    resource = Resource.create({"service.name": f"{library}-agent"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{otlp_url}/v1/traces", headers=headers))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{otlp_url}/v1/logs", headers=headers))
    )
    trace.set_tracer_provider(tracer_provider)
    _logs.set_logger_provider(logger_provider)
    chat = _instrumented(library, openai_url)
    tracer = tracer_provider.get_tracer("support-agent")
    with tracer.start_as_current_span(
        "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent",
                                            "gen_ai.agent.name": "support"},
    ) as agent:  # fmt: skip
        chat()
    logger_provider.shutdown()
    tracer_provider.shutdown()
    print(f"{agent.get_span_context().trace_id:032x}", flush=True)


def _instrumented(library: str, openai_url: str):
    """One chat call through `library`, instrumented."""
    if library == "openai-v2":
        import openai
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument()
        client = openai.OpenAI(base_url=openai_url, api_key="stand-in")
        return lambda: client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}]
        )
    if library == "openllmetry":
        import openai
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TraceloopOpenAI

        TraceloopOpenAI(use_attributes=False).instrument()
        client = openai.OpenAI(base_url=openai_url, api_key="stand-in")
        return lambda: client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}]
        )
    raise SystemExit(f"unknown library {library!r}: openai-v2 or openllmetry")


if __name__ == "__main__":
    main(*sys.argv[1:])
