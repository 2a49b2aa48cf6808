"""The hand-off stories' scripted model: an OpenAI-compatible chat-completions endpoint on
127.0.0.1 that answers each request with the story's next step for the agent asking (a
tool call, a hand-off or the answer), so each framework talks to it through its own
OpenAI client. A step asked of the wrong agent is answered with a text that says so (the
story then does not play out, and its test fails naming it)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.integration.handoffs.stories import reply_step

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


def reply_message(request: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The assistant message answering `request`, and its finish reason."""
    found = reply_step(request.get("messages") or [])
    if found is None:
        return {"role": "assistant", "content": "I can only help with your account."}, "stop"
    story, index, agent = found
    if index >= len(story.steps):
        return {"role": "assistant", "content": f"{story.name}: no step {index}"}, "stop"
    step = story.steps[index]
    if step.agent != agent:
        text = f"{story.name}: step {index} is {step.agent}'s, asked of {agent or 'no agent'}"
        return {"role": "assistant", "content": text}, "stop"
    if not step.tool:
        return {"role": "assistant", "content": step.answer}, "stop"
    tool_call = {
        "id": f"call_{story.name}_{index}",
        "type": "function",
        "function": {"name": step.tool, "arguments": json.dumps(step.arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"


def completion(request: dict[str, Any]) -> dict[str, Any]:
    message, finish = reply_message(request)
    return {
        "id": f"chatcmpl-scripted-{time.time_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


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
    """Answers `POST /v1/chat/completions` (not streamed) from the stories."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if not self.path.endswith("/chat/completions") or request.get("stream"):
            body, status = b'{"error": {"message": "only unstreamed /v1/chat/completions"}}', 400
        else:
            body, status = json.dumps(completion(request)).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
