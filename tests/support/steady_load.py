"""A steady OTLP load and a scripted webhook receiver, for the fault tests.

`SteadyLoad` POSTs raw OTLP/HTTP protobuf requests of demo agent traces (captured once
from the official OTel SDK, each copy with fresh trace ids) at a fixed rate from a few
keep-alive connections, and keeps the (trace id, span id) of every span the collector
acknowledged (HTTP 200, no rejected spans). A request that fails (connection refused
while a process restarts, a 503) is sent again, as an exporter would, so the load goes on
through a fault and `acknowledged` is exactly what the collector promised to keep.

`ScriptedReceiver` is an alert webhook that answers from a script with bad answers in it
(503, 429, a connection closed without an answer), can be taken down (connections
refused) and brought back on the same port, and counts what it received per
(tenant, alert key), so repeats are counted, not hidden.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pathgrade.content.pii import id_holds_card

from pathgrade.demo.scenarios import CLEAN_SCENARIOS, plan_turns
from pathgrade.demo.sender import send_demo_traces

SpanKey = tuple[str, str]  # (trace id hex, span id hex)


def demo_template(traces: int = 200, seed: int = 5, failing: int = 6) -> ExportTraceServiceRequest:
    """Demo agent traces as one OTLP request, as the official SDK encodes them: the clean
    turns of `traces` and the first `failing` turns that raise alerts (the demo's deck has
    30 %: a load of them would spend the machine on alerts)."""
    exporter = InMemorySpanExporter()
    summary = send_demo_traces(exporter, traces=traces, seed=seed)
    alerting = [
        trace_id
        for trace_id, turn in zip(summary.trace_ids, plan_turns(traces, seed), strict=True)
        if turn.scenario not in CLEAN_SCENARIOS
    ]
    dropped = {bytes.fromhex(trace_id) for trace_id in alerting[failing:]}
    return encode_spans(
        [span for span in exporter.get_finished_spans()
         if span.context.trace_id.to_bytes(16, "big") not in dropped]
    )  # fmt: skip


def fresh_requests(
    template: ExportTraceServiceRequest, spans_per_request: int, requests: int, seed: int
) -> list[tuple[bytes, list[SpanKey]]]:
    """`requests` bodies of at least `spans_per_request` spans each (up to the end of a
    trace: the SDK exports a trace's root last), taken in turn from `template`, every pass
    over it with new trace ids; each with the spans it carries. Every span is stored under
    the ids it is sent with: an id that holds a card number, which the collector replaces
    by its fingerprint (`content.pii.id_holds_card`: about 1 random span id in 8,000, so
    about 1 demo template of 560 spans in 14), is drawn anew."""
    rng = random.Random(seed)
    spans = [
        (resource, scope, span)
        for resource in template.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    span_ids = {
        span.span_id: _stored_as_sent(rng, len(span.span_id))
        for _, _, span in spans
        if id_holds_card(span.span_id.hex())
    }  # the template's span ids the collector would replace -> ids it keeps
    renamed: dict[tuple[int, bytes], bytes] = {}  # (pass, trace id) -> its new id
    out: list[tuple[bytes, list[SpanKey]]] = []
    position = 0
    for _ in range(requests):
        request = ExportTraceServiceRequest()
        resource_out = request.resource_spans.add()
        resource_out.resource.CopyFrom(spans[0][0].resource)
        scope_out = resource_out.scope_spans.add()
        scope_out.scope.CopyFrom(spans[0][1].scope)
        keys: list[SpanKey] = []
        while True:
            span = spans[position % len(spans)][2]
            copy = scope_out.spans.add()
            copy.CopyFrom(span)
            trace = (position // len(spans), span.trace_id)
            if trace not in renamed:
                renamed[trace] = _stored_as_sent(rng, 16)
            copy.trace_id = renamed[trace]
            if span_ids:
                copy.span_id = span_ids.get(span.span_id, span.span_id)
                copy.parent_span_id = span_ids.get(span.parent_span_id, span.parent_span_id)
            keys.append((copy.trace_id.hex(), copy.span_id.hex()))
            position += 1
            if len(keys) >= spans_per_request and not span.parent_span_id:
                break
        out.append((request.SerializeToString(), keys))
    return out


def _stored_as_sent(rng: random.Random, size: int) -> bytes:
    """A random id of `size` bytes that the collector stores as it is (not a card number
    written into an id)."""
    drawn = rng.randbytes(size)
    while id_holds_card(drawn.hex()):
        drawn = rng.randbytes(size)
    return drawn


class SteadyLoad:
    """Sends `requests` to `http://127.0.0.1:port/v1/traces`, request n at `n * interval_s`
    from the start, from `senders` threads on keep-alive connections of their own (as
    several agents export at once: a request that waits for its fsync does not hold up the
    next one), until they are all sent or `stop()`; `acknowledged` holds what the
    collector acknowledged."""

    def __init__(
        self,
        port: int,
        requests: list[tuple[bytes, list[SpanKey]]],
        interval_s: float,
        senders: int = 4,
    ) -> None:
        self.port = port
        self.requests = requests
        self.interval_s = interval_s
        self.acknowledged: set[SpanKey] = set()
        self.retries = 0
        self.rejected = 0  # spans the collector refused (none are expected)
        self.started = 0.0
        self._next = 0
        self._stopped = False
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._send, name=f"steady-load-{n}", daemon=True)
            for n in range(senders)
        ]

    def start(self) -> None:
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def join(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self._threads):
            raise AssertionError(f"the load did not finish in {timeout_s} s")

    def stop(self) -> None:
        """Send no request after those under way; `join` waits for them."""
        with self._lock:
            self._stopped = True

    def _take(self) -> int | None:
        with self._lock:
            if self._next == len(self.requests) or self._stopped:
                return None
            self._next += 1
            return self._next - 1

    def _send(self) -> None:
        connection: http.client.HTTPConnection | None = None
        while (index := self._take()) is not None:
            body, keys = self.requests[index]
            delay = self.started + index * self.interval_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            while True:
                connection = connection or http.client.HTTPConnection(
                    "127.0.0.1", self.port, timeout=30
                )
                answered = _post(connection, body)
                if answered is not None:
                    break
                connection.close()
                connection = None
                with self._lock:
                    self.retries += 1
                time.sleep(0.5)
            with self._lock:
                self.rejected += answered
                if not answered:
                    self.acknowledged.update(keys)
        if connection is not None:
            connection.close()


def _post(connection: http.client.HTTPConnection, body: bytes) -> int | None:
    """POST one request: the number of spans it rejected, or None when it was not
    acknowledged (no answer, or not 200)."""
    try:
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        answer = response.read()
    except (OSError, http.client.HTTPException):
        return None
    if response.status != 200:
        return None
    return ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans


class _QuietServer(ThreadingHTTPServer):
    """A threading HTTP server that does not print a traceback when a sender hangs up
    (the realtime process is killed mid-request in these tests)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class ScriptedReceiver:
    """An alert webhook on a fixed loopback port; `down()` refuses connections until
    `up()`. Request n (from 1) is answered 503 when n % 10 == 3, 429 when n % 17 == 5,
    and closed without an answer when n % 23 == 7; 200 otherwise."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.received: Counter[tuple[str, str]] = Counter()  # answered 200
        self.key_mismatches = 0  # Idempotency-Key not the body's alert key
        self.requests = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/alerts"

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status = receiver._answer(json.loads(body), self.headers.get("Idempotency-Key"))
                if status is None:
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = _QuietServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _answer(self, alert: dict[str, Any], key: str | None) -> int | None:
        with self._lock:
            self.requests += 1
            number = self.requests
            if number % 23 == 7:
                return None
            if number % 10 == 3:
                return 503
            if number % 17 == 5:
                return 429
            self.received[(alert["tenant"], alert["alert_key"])] += 1
            self.key_mismatches += key != alert["alert_key"]
            return 200

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def delivered(self) -> set[tuple[str, str]]:
        with self._lock:
            return set(self.received)

    def repeats(self) -> int:
        with self._lock:
            return sum(count - 1 for count in self.received.values())
