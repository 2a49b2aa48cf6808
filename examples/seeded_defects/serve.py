"""One build of the seeded-defect agent behind HTTP, as `pathgrade eval --agent URL` drives
an agent under test over the network.

    python examples/seeded_defects/serve.py plan_guard --port 8700 --otlp http://127.0.0.1:4318
    pathgrade eval examples/seeded_defects/suite.yaml --agent http://127.0.0.1:8700/turn \
        --agent-state http://127.0.0.1:8700/state

`POST /turn` answers one user turn (`{"conversation_state", "user_message",
"eval_context"}` -> an agent turn); `POST /state` returns the sandbox's state after the
attempt (`{"conversation_state", "eval_context"}` -> a JSON object). The evaluation context
arrives as W3C baggage, which the server attaches while the agent runs, so the agent's
root spans carry it (exported over OTLP/HTTP to `--otlp`) and its sandbox is the
attempt's own.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent import BUILDS, SupportAgent  # run as a script: its folder is on the path
from opentelemetry import context, propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pathgrade.batch_plane.agents.adapters import EvalContextSpanProcessor


def handler_for(agent: SupportAgent) -> type[BaseHTTPRequestHandler]:
    """A request handler serving `agent`'s turns and its sandbox's state."""
    routes: dict[str, Callable[[dict[str, Any]], Any]] = {
        "/turn": lambda body: agent.respond(body["conversation_state"], body["user_message"], None),
        "/state": lambda body: agent.end_state(body["conversation_state"], None),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            route = routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            token = context.attach(propagate.extract(dict(self.headers)))
            try:
                answer = json.dumps(route(body)).encode()
            finally:
                context.detach(token)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", choices=sorted(BUILDS))
    parser.add_argument("--port", type=int, default=8700)
    parser.add_argument("--otlp", required=True, help="OTLP/HTTP base URL of the collector")
    args = parser.parse_args(argv)
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(EvalContextSpanProcessor())
    exporter = OTLPSpanExporter(endpoint=f"{args.otlp.rstrip('/')}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler_for(BUILDS[args.build]))
    print(f"serving {args.build} on http://127.0.0.1:{args.port}/turn", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
