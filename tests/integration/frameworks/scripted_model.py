"""The scripted model of the conformance matrix: an OpenAI-compatible chat-completions
endpoint on 127.0.0.1 that plays the stories (stories.py) step by step, with tool calls,
plain or streamed (server-sent events), so every framework talks to it through its own
OpenAI client. Nothing here reaches the internet."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.integration.frameworks.stories import FINAL_ANSWER_TOOL, Step, step_for_messages

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
UNSCRIPTED = "I can only help with your account."
"""The answer to a request that names no story (a framework's own side request)."""


def offered_tools(request: dict[str, Any]) -> set[str]:
    """The tool names a chat-completions request offers the model."""
    return {t.get("function", {}).get("name", "") for t in request.get("tools") or []}


def reply_message(request: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The assistant message answering `request`, and its finish reason. A tool is called
    by the name the request offers it under (Semantic Kernel offers `plugin-function`)."""
    step = step_for_messages(request.get("messages") or [], offered_tools(request))
    if step is None:
        return {"role": "assistant", "content": UNSCRIPTED}, "stop"
    if step.call is None and FINAL_ANSWER_TOOL not in offered_tools(request):
        return {"role": "assistant", "content": step.story.answer}, "stop"
    name, arguments = _call_of(step)
    name = next((o for o in sorted(offered_tools(request)) if o.endswith(f"-{name}")), name)
    call = {
        "id": step.call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def _call_of(step: Step) -> tuple[str, dict[str, Any]]:
    if step.call is None:
        return FINAL_ANSWER_TOOL, {"answer": step.story.answer}
    return step.call.tool, step.call.arguments


def completion(request: dict[str, Any]) -> dict[str, Any]:
    """A whole `chat.completion` answering `request`."""
    message, finish = reply_message(request)
    return {
        "id": f"chatcmpl-scripted-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


def chunks(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The same reply as `chat.completion.chunk` events (the last carries the usage)."""
    message, finish = reply_message(request)
    base = {
        "id": f"chatcmpl-scripted-{time.time_ns()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
    }
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **c} for c in message["tool_calls"]]
    else:
        delta["content"] = message["content"]
    yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    yield {**base, "choices": [], "usage": USAGE}


class ScriptedModel:
    """Start with `with ScriptedModel() as model:`; `model.url` is the base URL (.../v1)."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class Handler(BaseHTTPRequestHandler):
    """Answers `POST /v1/chat/completions` from the script."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if not self.path.endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "only /v1/chat/completions"}}')
        elif request.get("stream"):
            events = [f"data: {json.dumps(c)}\n\n" for c in chunks(request)]
            self._send(200, "".join([*events, "data: [DONE]\n\n"]).encode(), "text/event-stream")
        else:
            self._send(200, json.dumps(completion(request)).encode())

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
