"""A local stand-in for an OpenAI chat-completions endpoint: a real HTTP server on
127.0.0.1 answering `POST /v1/chat/completions`.

Replies come from a script (`enqueue`) and then from `answer(request)`. By default that is
`ScriptedAnswers`, which says no as often as yes: each new prompt (new messages) takes the
next turn of `DEFAULT_SCRIPT` — the best answer the request's json_schema allows, its
lowest (a failing verdict), a malformed answer (not JSON) then the best, an answer off the
schema (a score above the scale) then the lowest — and keeps its answer for every later
request with the same messages (a retry or a repeat), as a model at temperature 0 would.
A request without a json_schema (a user simulator's turn) gets free text the same way: a
reply, a refusal, no content at all then a reply. Replies can also inject HTTP statuses
(429 with Retry-After, 500), delays (client timeouts) and malformed content.
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
    malformed JSON), NO_CONTENT or None (the default answer). `body`, when given, is the
    whole response body instead of a chat completion (a malformed response)."""

    content: Any = None
    body: str | None = None
    status: int = 200
    retry_after: str | None = None
    delay_s: float = 0.0
    prompt_tokens: int = 120
    completion_tokens: int = 30


NO_CONTENT = object()
"""An answer whose message has `"content": null` (what a model sends when it refuses)."""


def schema_answer(schema: dict[str, Any], lowest: bool = False) -> Any:
    """The best value `schema` allows (maximum numbers, True, placeholder text), or with
    `lowest` the worst (minimum numbers, False, a refusal); arrays are empty."""
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            name: schema_answer(properties.get(name, {}), lowest)
            for name in schema.get("required", [])
        }
    if kind in ("integer", "number"):
        return schema.get("minimum", 0) if lowest else schema.get("maximum", 1)
    if kind == "array":
        return []
    if kind == "boolean":
        return not lowest
    return "stand-in verdict: no" if lowest else "stand-in verdict"


def request_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The json_schema the request asks its answer to follow, if any."""
    response_format = request.get("response_format") or {}
    return (response_format.get("json_schema") or {}).get("schema")


def best(request: dict[str, Any]) -> Any:
    """The best answer the request's json_schema allows, else a plain reply."""
    schema = request_schema(request)
    return schema_answer(schema) if schema else "Yes, please go on."


def lowest(request: dict[str, Any]) -> Any:
    """The lowest answer the request's json_schema allows, else a refusal."""
    schema = request_schema(request)
    return schema_answer(schema, lowest=True) if schema else "No, that is not what I asked for."


def not_json(request: dict[str, Any]) -> Any:
    """Truncated JSON for a judge; a message with no content for a user simulator."""
    return '{"score": ' if request_schema(request) else NO_CONTENT


def off_schema(request: dict[str, Any]) -> Any:
    """The best answer with every number past the schema's maximum (a score of 9 on 1-4)."""
    schema = request_schema(request)
    if not schema:
        return NO_CONTENT
    answer = schema_answer(schema)
    properties = schema.get("properties", {})
    return {
        name: properties[name].get("maximum", 0) + 5
        if properties.get(name, {}).get("type") in ("integer", "number")
        else value
        for name, value in answer.items()
    }


@dataclass(frozen=True)
class Turn:
    """What the script answers a new prompt: `first` to its first request, `later` to
    every later request with the same messages."""

    first: Callable[[dict[str, Any]], Any]
    later: Callable[[dict[str, Any]], Any]


DEFAULT_SCRIPT = (
    Turn(best, best),
    Turn(lowest, lowest),
    Turn(not_json, best),
    Turn(off_schema, lowest),
)


class ScriptedAnswers:
    """`answer(request)` following `script` turn by turn, one turn per new prompt (its
    messages); thread-safe. `final` maps each prompt to the answer it was last given."""

    def __init__(self, script: tuple[Turn, ...] = DEFAULT_SCRIPT) -> None:
        self.script = script
        self.final: dict[str, Any] = {}
        self._turns: dict[str, Turn] = {}
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Any:
        key = prompt_key(request)
        with self._lock:
            turn = self._turns.get(key)
            if turn is None:
                turn = self._turns[key] = self.script[len(self._turns) % len(self.script)]
                answer = turn.first(request)
            else:
                answer = turn.later(request)
            self.final[key] = answer
            return answer

    def verdicts(self, schema_name: str) -> list[Any]:
        """The answer each prompt of rubric `schema_name` was last given."""
        return [self.final[key] for key in self._turns if json.loads(key)[0] == schema_name]


def prompt_key(request: dict[str, Any]) -> str:
    """A prompt's identity: the json_schema's name (the rubric) and the messages."""
    name = ((request.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    return json.dumps([name, request.get("messages")], sort_keys=True)


class OpenAIStandIn:
    """Start with `with OpenAIStandIn() as server:`; `server.url` is the base URL (…/v1).
    With `held=True` every request waits, counted in flight, until `release()` lets it be
    answered, so a test sees requests overlap whatever the machine's load."""

    def __init__(
        self,
        latency_s: float = 0.0,
        answer: Callable[[dict[str, Any]], Any] | None = None,
        held: bool = False,
    ) -> None:
        self.latency_s = latency_s
        self._held = threading.Semaphore(0) if held else None
        self.scripted = ScriptedAnswers()
        self.answer = answer or self.scripted
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._in_flight_changed = threading.Condition(self._lock)
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

    def release(self, requests: int = 1) -> None:
        """Let this many held requests be answered (held=True)."""
        assert self._held is not None, "the stand-in holds no request (held=False)"
        self._held.release(requests)

    def wait_for_in_flight(self, count: int, timeout_s: float = 60.0) -> bool:
        """Wait until exactly `count` requests are in flight; False on timeout."""
        with self._in_flight_changed:
            return self._in_flight_changed.wait_for(lambda: self.in_flight == count, timeout_s)

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._in_flight_changed.notify_all()
            reply = self.script.popleft() if self.script else Reply()
        if self._held is not None:
            self._held.acquire()
        return reply

    def done(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._in_flight_changed.notify_all()


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
                if reply.body is not None:
                    self._send_bytes(200, reply.body.encode())
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
            self._send_bytes(status, json.dumps(body).encode(), headers)

        def _send_bytes(
            self, status: int, data: bytes, headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _completion(request: dict[str, Any], reply: Reply, content: Any) -> dict[str, Any]:
    text = (
        None
        if content is NO_CONTENT
        else content
        if isinstance(content, str)
        else json.dumps(content)
    )
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
    """Serve until interrupted: `python -m tests.support.openai_standin [--latency-s 0.2]
    [--always-best]`; prints the base URL on the first line."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument(
        "--always-best", action="store_true", help="answer every request with the best answer"
    )
    args = parser.parse_args()
    with OpenAIStandIn(
        latency_s=args.latency_s, answer=best if args.always_best else None
    ) as server:
        print(server.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
