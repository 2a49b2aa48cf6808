"""A local stand-in for an OpenAI chat-completions endpoint: a real HTTP server on
127.0.0.1 answering `POST /v1/chat/completions`.

Replies come from a script (`enqueue`) and then from `answer(request)`, by default the
best answer the request's json_schema allows (maximum scores). Replies can inject HTTP
statuses (429 with Retry-After, 500), delays (client timeouts) and malformed content.
Nothing here reaches the internet.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted reply. `content`: a dict (sent as JSON text), a str (sent as is, e.g.
    malformed JSON) or None (the default answer)."""

    content: Any = None
    status: int = 200
    retry_after: str | None = None
    delay_s: float = 0.0
    prompt_tokens: int = 120
    completion_tokens: int = 30


def schema_answer(schema: dict[str, Any]) -> Any:
    """The best value `schema` allows: maximum numbers, empty arrays, placeholder text."""
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            name: schema_answer(properties.get(name, {})) for name in schema.get("required", [])
        }
    if kind in ("integer", "number"):
        return schema.get("maximum", 1)
    if kind == "array":
        return []
    if kind == "boolean":
        return True
    return "stand-in verdict"


def default_answer(request: dict[str, Any]) -> Any:
    """The best answer allowed by the request's json_schema, else a passing verdict."""
    response_format = request.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema")
    return schema_answer(schema) if schema else {"score": 1, "explanation": "stand-in verdict"}


class OpenAIStandIn:
    """Start with `with OpenAIStandIn() as server:`; `server.url` is the base URL (…/v1)."""

    def __init__(
        self, latency_s: float = 0.0, answer: Callable[[dict[str, Any]], Any] = default_answer
    ) -> None:
        self.latency_s = latency_s
        self.answer = answer
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def enqueue(self, *replies: Reply) -> None:
        """Replies for the next requests, in order (then the default answer)."""
        with self._lock:
            self.script.extend(replies)

    def __enter__(self) -> OpenAIStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.script.popleft() if self.script else Reply()

    def done(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler(standin: OpenAIStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms stall)

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = standin.next_reply(request)
            try:
                time.sleep(standin.latency_s + reply.delay_s)
                if reply.status != 200:
                    headers = {"Retry-After": reply.retry_after} if reply.retry_after else {}
                    self._send(reply.status, {"error": {"message": "injected"}}, headers)
                    return
                content = reply.content if reply.content is not None else standin.answer(request)
                self._send(200, _completion(request, reply, content))
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)
            finally:
                standin.done()

        def _send(
            self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _completion(request: dict[str, Any], reply: Reply, content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {
        "id": f"chatcmpl-standin-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def main() -> None:
    """Serve until interrupted: `python -m tests.support.openai_standin [--latency-s 0.2]`;
    prints the base URL on the first line."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-s", type=float, default=0.0)
    args = parser.parse_args()
    with OpenAIStandIn(latency_s=args.latency_s) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
