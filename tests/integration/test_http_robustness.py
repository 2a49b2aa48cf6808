"""Every malformed request gets an answer, and connections cannot hold the collector's
threads (issue 15, poison inputs): raw sockets against a real `pathgrade collector`."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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


# ------------------------------------------------------------ slow and many connections
# Issue 38: connections that trickle a request held a worker each (the read timeout
# restarted with every byte), so 33 of them stopped ingestion.

TRICKLE_INTERVAL_S = 0.4
PATIENT_READ_TIMEOUT_S = 6


@contextlib.contextmanager
def collector_with(directory: Path, settings: str) -> Iterator[Collector]:
    """A collector of its own (with its own broker) with these YAML settings."""
    broker = LocalBroker(log_path=directory / "broker.log")
    broker.start()
    ensure_topics(broker.bootstrap)
    config = directory / "collector.yaml"
    config.write_text(settings)
    process, grpc_port, http_port = start_collector(
        broker.bootstrap, directory / "spill", "--config", str(config)
    )
    try:
        yield Collector(process, grpc_port, http_port)
    finally:
        assert process.terminate() == 0, process.output
        broker.stop()


@pytest.fixture(scope="module")
def patient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector of 8 workers that gives a request head or a quiet body 6 s."""
    settings = f"read_timeout_s: {PATIENT_READ_TIMEOUT_S}\nreceiver_workers: {WORKERS}\n"
    with collector_with(tmp_path_factory.mktemp("patient"), settings) as started:
        yield started


def trickle(sock: socket.socket, head: bytes, drip: bytes) -> tuple[int, dict, int]:
    """Send `head`, then `drip` a byte every TRICKLE_INTERVAL_S until the collector
    answers; its status, body and how many bytes were dripped by then."""
    sock.sendall(head)
    for sent in range(len(drip)):
        if select.select([sock], [], [], TRICKLE_INTERVAL_S)[0]:
            return (*read_answer(sock), sent)
        sock.sendall(drip[sent : sent + 1])
    raise AssertionError("the collector let a trickling request arrive whole")


@contextlib.contextmanager
def trickling(
    collector: Collector, requests: list[tuple[bytes, bytes]]
) -> Iterator[list[Future[tuple[int, dict, int]]]]:
    """Each (head, drip) trickled on a connection of its own, in threads."""
    pool = ThreadPoolExecutor(len(requests))
    sockets = [collector.connect() for _ in requests]
    try:
        yield [
            pool.submit(trickle, sock, head, drip)
            for sock, (head, drip) in zip(sockets, requests, strict=True)
        ]
    finally:
        for sock in sockets:
            sock.close()
        pool.shutdown(wait=True)


def test_an_export_succeeds_while_a_hundred_connections_trickle_their_bodies(
    patient: Collector,
) -> None:
    """100 connections send a head and then a body byte every 0.4 s (half announcing a
    body of 64 MiB), 50 more their head byte by byte: the official exporter is answered
    while they are all open, and each of them is answered 408 long before its request
    could be whole (the read timeout no longer restarts with every byte)."""
    head = post(b"").replace(b"Content-Length: 0", b"Content-Length: %d")
    small, huge = head % 10_000, head % (64 * 1024 * 1024 - 1)
    requests = [(small if i % 2 else huge, b"{" * 10_000) for i in range(100)]
    requests += [(b"", post(b"{}")) for _ in range(50)]
    with trickling(patient, requests) as futures:
        time.sleep(TRICKLE_INTERVAL_S * 2)  # every trickler is under way
        url = f"http://127.0.0.1:{patient.http_port}/v1/traces"
        summary = send_demo_traces(OTLPSpanExporter(endpoint=url), traces=5, seed=38)
        assert summary.spans > 0  # (send_demo_traces raises when an export failed)
        assert not any(future.done() for future in futures)  # all open meanwhile
        answers = [future.result(timeout=PATIENT_READ_TIMEOUT_S * 20) for future in futures]
    bodies, heads = answers[:100], answers[100:]
    assert {code for code, _, _ in answers} == {408}
    assert all("slower than the minimum" in answer["message"] for _, answer, _ in bodies)
    assert all("not completed within" in answer["message"] for _, answer, _ in heads)
    assert max(sent for _, _, sent in bodies) < 100  # cut off, far from whole
    assert max(sent for _, _, sent in heads) < len(post(b"{}"))


def test_a_body_that_drips_after_a_burst_is_cut_all_the_same(patient: Collector) -> None:
    """48 MiB at once, then a byte every 0.4 s: the burst buys no time (every
    read_timeout_s must bring its quota), so the drip is answered 408 within a window or
    two, not after the minutes the burst would have paid for at min_body_rate."""
    burst = 48 * 1024 * 1024
    head = post(b"").replace(b"Content-Length: 0", b"Content-Length: %d" % (burst + 10_000))
    with patient.connect() as sock:
        code, answer, dripped = trickle(sock, head + b" " * burst, b" " * 10_000)
    assert code == 408 and "slower than the minimum" in answer["message"], answer
    assert dripped < 3 * PATIENT_READ_TIMEOUT_S / TRICKLE_INTERVAL_S


def test_blank_lines_start_no_request_and_keep_no_connection_open(collector: Collector) -> None:
    """The parser skips empty lines before a request line: a client sending only those
    is still idle, and closed after idle_timeout_s however often it sends one."""
    with collector.connect() as sock:
        for _ in range(IDLE_TIMEOUT_S * 10):
            if select.select([sock], [], [], 0.5)[0]:
                assert sock.recv(1) == b""  # closed, without an answer
                return
            sock.sendall(b"\r\n")
    raise AssertionError("a connection sending blank lines was kept open")


MAX_CONNECTIONS = 40
MAX_BODY_OF_CAPPED = 100_000


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector of few connections and little body memory (2 workers x 100 KB)."""
    settings = (
        f"max_connections: {MAX_CONNECTIONS}\nreceiver_workers: 2\n"
        f"max_body_bytes: {MAX_BODY_OF_CAPPED}\nread_timeout_s: 60\nidle_timeout_s: 60\n"
    )
    with collector_with(tmp_path_factory.mktemp("capped"), settings) as started:
        yield started


def is_open_and_silent(sock: socket.socket) -> bool:
    """Whether the collector neither answered nor closed `sock` (yet)."""
    sock.setblocking(False)
    try:
        sock.recv(1)
    except BlockingIOError:
        return True
    return False


def test_many_connections_from_one_client_make_room_for_another(capped: Collector) -> None:
    """Past `max_connections`, a new connection closes the one whose request has been
    arriving longest (unanswered: nothing of it was accepted); the exporter gets in."""
    stalled = []
    for _ in range(MAX_CONNECTIONS + 10):
        sock = capped.connect()
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        stalled.append(sock)
        time.sleep(0.01)  # arrive in order
    try:
        url = f"http://127.0.0.1:{capped.http_port}/v1/traces"
        send_demo_traces(OTLPSpanExporter(endpoint=url), traces=3, seed=39)
        for sock in stalled[:10]:
            sock.settimeout(30)
            assert sock.recv(1) == b""  # closed to make room, without an answer
        assert all(is_open_and_silent(sock) for sock in stalled[-MAX_CONNECTIONS // 2 :])
    finally:
        for sock in stalled:
            sock.close()


def test_bodies_past_the_memory_they_may_take_get_503_and_retry_after(
    capped: Collector,
) -> None:
    """Bodies held in memory count the bytes received: two nearly whole 100 KB bodies
    leave no room for a third request of 50 KB (503, Retry-After), and room again once
    they are answered."""
    length = MAX_BODY_OF_CAPPED - 1000
    document = span_request()
    body = document + b" " * (length - len(document))
    held = [capped.connect() for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(post(body)[:-1000])  # all but the last 1000 bytes
        time.sleep(0.5)  # received
        code, answer = capped.exchange(post(b" " * 50_000))
        assert code == 503 and "memory" in answer["message"], answer
        with capped.connect() as sock:
            sock.sendall(post(b" " * 50_000)[:200])
            assert read_answer(sock)[0] == 503
        for sock in held:
            sock.sendall(post(body)[-1000:])
            assert read_answer(sock)[0] == 200
        assert capped.exchange(post(span_request()))[0] == 200
    finally:
        for sock in held:
            sock.close()
