"""Every malformed request gets an answer, and connections cannot hold the collector's
threads (issue 15, poison inputs): raw sockets against a real `pathgrade collector`."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from pathgrade.demo.sender import send_demo_traces
from pathgrade.stack.broker import LocalBroker, ensure_topics
from tests.integration.conftest import PathgradeProcess, start_collector, wait_until
from tests.integration.test_ingest import EXPORT_METHOD
from tests.support.otlp_values import nested_value

pytestmark = pytest.mark.integration

IDLE_TIMEOUT_S = 4
READ_TIMEOUT_S = 2
WORKERS = 8
TRACE_ID, SPAN_ID = "ab" * 16, "cd" * 8


class Collector:
    def __init__(self, process: PathgradeProcess, grpc_port: int, http_port: int) -> None:
        self.process = process
        self.grpc_port = grpc_port
        self.http_port = http_port

    def threads(self) -> int:
        """Threads of the collector process now (Linux /proc)."""
        return len(list(Path(f"/proc/{self.process.process.pid}/task").iterdir()))

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.http_port), timeout=30)

    def exchange(self, data: bytes) -> tuple[int, dict]:
        """Send `data` on a new connection; the answer's status and JSON body."""
        with self.connect() as sock:
            sock.sendall(data)
            return read_answer(sock)


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    directory = tmp_path_factory.mktemp("robust")
    broker = LocalBroker(log_path=directory / "broker.log")
    broker.start()
    ensure_topics(broker.bootstrap)
    config = directory / "collector.yaml"
    config.write_text(
        f"idle_timeout_s: {IDLE_TIMEOUT_S}\nread_timeout_s: {READ_TIMEOUT_S}\n"
        f"receiver_workers: {WORKERS}\n"
    )
    process, grpc_port, http_port = start_collector(
        broker.bootstrap, directory / "spill", "--config", str(config)
    )
    yield Collector(process, grpc_port, http_port)
    assert process.terminate() == 0, process.output
    broker.stop()


def read_answer(sock: socket.socket) -> tuple[int, dict]:
    """One HTTP response from `sock`: status code and its google.rpc.Status body (JSON, or
    protobuf for a protobuf request) as a dict. Reads exactly that response, so pipelined
    answers are read one by one."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        assert byte, f"connection closed without an answer after {head!r}"
        head += byte
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    body = b""
    while len(body) < int(headers["content-length"]):
        body += sock.recv(int(headers["content-length"]) - len(body))
    if headers["content-type"] == "application/x-protobuf":
        status = status_pb2.Status.FromString(body)
        return int(lines[0].split()[1]), {"code": status.code, "message": status.message}
    return int(lines[0].split()[1]), json.loads(body)


def post(body: bytes, *headers: str, content_type: str = "application/json") -> bytes:
    head = [
        "POST /v1/traces HTTP/1.1", "Host: x", f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}", *headers,
    ]  # fmt: skip
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def post_raw_length(length: str, body: bytes = b"{}") -> bytes:
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode() + body


def span_request(**span: object) -> bytes:
    fields = {"traceId": TRACE_ID, "spanId": SPAN_ID, "name": "n", "startTimeUnixNano": 1,
              "endTimeUnixNano": 2, **span}  # fmt: skip
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [fields]}]}]}
    return json.dumps(document).encode()  # non-ASCII as \\u escapes, lone surrogates too


MALFORMED = [
    ("JSON nested 2,000 levels", post(b"[" * 2000 + b"]" * 2000), 400, "nested deeper than"),
    ("JSON objects nested 2,000 levels", post(b'{"a":' * 2000 + b"1" + b"}" * 2000), 400,
     "nested deeper than"),
    ("AnyValue arrays nested 120 levels",
     post(span_request(attributes=[{"key": "a", "value": nested_value(120, "array")}])), 400,
     "nested deeper than"),
    ("AnyValue kvlists nested 100 levels",
     post(span_request(attributes=[{"key": "a", "value": nested_value(100, "kvlist")}])), 400,
     "nested deeper than"),
    ("a lone surrogate escape", post(span_request(name="a\ud800")), 400, "lone surrogate"),
    ("a lone surrogate in an enum", post(span_request(kind="\udfff")), 400, "lone surrogate"),
    ("a non-ASCII hex id in raw UTF-8", post(json.dumps({"resourceSpans": [{"scopeSpans": [
        {"spans": [{"traceId": "é" * 32}]}]}]}, ensure_ascii=False).encode()), 400,
     "not a hex string"),
    ("a non-ASCII hex id", post(span_request(traceId="é" * 32)), 400, "not a hex string"),
    ("a superscript hex id", post(span_request(spanId="²" * 16)), 400, "not a hex string"),
    ("a non-numeric Content-Length", post_raw_length("abc"), 400, "Content-Length must be"),
    ("a negative Content-Length", post_raw_length("-5"), 400, "Content-Length must be"),
    ("a superscript Content-Length", post_raw_length("²"), 400, "Content-Length must be"),
    ("a signed Content-Length", post_raw_length("+2"), 400, "Content-Length must be"),
    ("a 5,000-digit Content-Length", post_raw_length("9" * 5000), 400, "Content-Length must be"),
    ("two different Content-Lengths", post(b"{}", "Content-Length: 3"), 400, "conflicting"),
    ("a chunked body", b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
     b"\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411, "Transfer-Encoding"),
    ("a header line of 70 KB", post(b"{}", "X-Big: " + "a" * 70_000), 431, "Line too long"),
    ("200 headers", post(b"{}", *[f"X-{i}: v" for i in range(200)]), 431, "Too many headers"),
    ("a 70 KB request line", b"POST /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "too long"),
    ("garbage", b"\x00\x01\x02 garbage\r\n\r\n", 400, "request type"),
    ("an unsupported method", b"DELETE /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n", 501, "method"),
    ("a body of invalid UTF-8", post(b'{"resourceSpans": "\xff"}'), 400, "not UTF-8"),
    ("a protobuf body that is not protobuf", post(b"\xff\xff\xff", content_type=
     "application/x-protobuf"), 400, "invalid OTLP protobuf"),
    ("a gzip body that is not gzip", post(b"not gzip", "Content-Encoding: gzip"), 400, "gzip"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "request_bytes", "status", "reason"), MALFORMED,
                         ids=[case[0] for case in MALFORMED])  # fmt: skip
def test_every_malformed_request_gets_an_answer_with_its_reason(
    collector: Collector, case: str, request_bytes: bytes, status: int, reason: str
) -> None:
    code, body = collector.exchange(request_bytes)
    assert (code, reason.lower() in body["message"].lower()) == (status, True), (case, body)


def test_a_body_that_stops_coming_is_answered_408_and_a_short_body_400(
    collector: Collector,
) -> None:
    code, body = collector.exchange(post_raw_length("100", b'{"resourceSpans"'))
    assert code == 408 and "16 of 100 bytes" in body["message"]
    with collector.connect() as sock:
        sock.sendall(post_raw_length("100", b'{"resourceSpans"'))
        sock.shutdown(socket.SHUT_WR)  # the client ends the body early
        code, body = read_answer(sock)
    assert code == 400 and "body ended after 16 of the 100 bytes" in body["message"]
    with collector.connect() as sock:  # headers that stop coming
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        assert read_answer(sock)[0] == 408


def test_a_refusal_before_the_body_closes_the_connection(collector: Collector) -> None:
    """A 404 or 415 leaves the body unread: reading it as the next request would answer
    garbage, so the connection is closed after the answer."""
    with collector.connect() as sock:
        sock.sendall(post(b'{"x": 1}', content_type="text/plain"))
        assert read_answer(sock)[0] == 415
        assert sock.recv(1) == b""


def test_keep_alive_and_pipelined_requests_are_answered_in_order(collector: Collector) -> None:
    good = post(span_request())
    with collector.connect() as sock:
        sock.sendall(good + post(span_request(traceId="zz" * 16)) + good)
        assert [read_answer(sock)[0] for _ in range(3)] == [200, 400, 200]
        sock.sendall(good)  # the same connection, later
        assert read_answer(sock)[0] == 200


def test_a_thousand_idle_connections_hold_no_threads_and_time_out(collector: Collector) -> None:
    baseline = collector.threads()
    idle = [collector.connect() for _ in range(1000)]
    half_open = [collector.connect() for _ in range(50)]
    for sock in half_open:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")  # a request line, then nothing
    try:
        time.sleep(1)
        assert collector.threads() <= baseline + WORKERS
        url = f"http://127.0.0.1:{collector.http_port}/v1/traces"
        # Served while they are open (send_demo_traces raises when an export failed).
        send_demo_traces(OTLPSpanExporter(endpoint=url), traces=5, seed=5)
        assert collector.threads() <= baseline + WORKERS
        for sock in idle[:20]:
            sock.settimeout(IDLE_TIMEOUT_S * 5)
            assert sock.recv(1) == b""  # closed by the collector: it sent nothing
        for sock in half_open[:5]:
            sock.settimeout(READ_TIMEOUT_S * 10)
            assert read_answer(sock)[0] == 408
    finally:
        for sock in idle + half_open:
            sock.close()
    wait_until(lambda: collector.threads() <= baseline + WORKERS)


def test_grpc_connections_hold_no_threads(collector: Collector) -> None:
    baseline = collector.threads()
    channels = [grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") for _ in range(200)]
    try:
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=30)
        assert collector.threads() <= baseline + WORKERS
    finally:
        for channel in channels:
            channel.close()


def deep_protobuf_request(levels: int) -> bytes:
    """An export request whose one attribute nests `levels` arrays (protobuf's parser
    stops at 100 message levels, about 47 arrays)."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add(
        trace_id=bytes.fromhex(TRACE_ID), span_id=bytes.fromhex(SPAN_ID), name="n",
        start_time_unix_nano=1, end_time_unix_nano=2,
    )  # fmt: skip
    value = span.attributes.add(key="deep").value
    for _ in range(levels):
        value = value.array_value.values.add()
    value.string_value = "x"
    return request.SerializeToString()


def test_protobuf_nested_past_the_parser_is_refused_on_both_receivers(
    collector: Collector,
) -> None:
    body = deep_protobuf_request(200)
    code, answer = collector.exchange(post(body, content_type="application/x-protobuf"))
    assert code == 400 and "invalid OTLP protobuf" in answer["message"]
    with grpc.insecure_channel(f"127.0.0.1:{collector.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        with pytest.raises(grpc.RpcError) as error:
            export(body, timeout=30)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "invalid OTLP protobuf" in (error.value.details() or "")
        response = ExportTraceServiceResponse.FromString(
            export(deep_protobuf_request(40), timeout=30)
        )
        assert response.partial_success.rejected_spans == 0  # within the limit: accepted
