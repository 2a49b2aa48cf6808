"""OTLP in -> collector -> Tansu -> store writer -> chDB, through `pathgrade up`, with the
official OTLP exporters and raw OTLP/JSON."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import status_pb2
from kafka import KafkaConsumer
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pathgrade.schemas.topics import SPANS_TOPIC

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until

pytestmark = pytest.mark.integration

MAX_BODY = 2 * 1024 * 1024
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class Stack:
    def __init__(self, process: PathgradeProcess, grpc_port: int, http_port: int) -> None:
        self.process = process
        self.grpc_port = grpc_port
        self.http_port = http_port
        self.http_url = f"http://127.0.0.1:{http_port}/v1/traces"

    def stored_once(self, trace_ids: list[str]) -> tuple[int, int]:
        """(rows after FINAL, distinct spans) for these traces."""
        ids = ",".join(f"'{t}'" for t in trace_ids)
        row = self.process.sql(
            f"SELECT count(), uniqExact(TraceId, SpanId) FROM spans FINAL WHERE TraceId IN ({ids})"
        ).rows[0]
        return row[0], row[1]

    def wait_stored(self, trace_ids: list[str], spans: int) -> None:
        wait_until(lambda: self.stored_once(trace_ids) == (spans, spans), timeout_s=60)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    data_dir = tmp_path_factory.mktemp("ingest")
    process, grpc_port, http_port = start_stack(
        data_dir, "--capture-tools", "*", "--capture-messages", "--max-body-bytes", str(MAX_BODY)
    )
    yield Stack(process, grpc_port, http_port)
    assert process.terminate() == 0, process.output


def post(
    url: str, body: bytes, content_type: str, gzip_body: bool = False, token: str | None = None
) -> tuple[int, bytes]:
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if gzip_body:
        body = gzip.compress(body)
        headers["Content-Encoding"] = "gzip"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def json_request(trace_id: str, spans: list[dict]) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"stringValue": "raw"}}]
                    },
                    "scopeSpans": [{"scope": {"name": "raw-json"}, "spans": spans}],
                }
            ]
        }
    ).encode()


def json_span(trace_id: str, span_id: str, name: str, start: int | str, end: int | str) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": 3,
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "120"}},
            {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 30}},
        ],
        "status": {"code": 1},
    }


def test_official_grpc_exporter_spans_stored_once_with_genai_columns(stack: Stack) -> None:
    exporter = GrpcSpanExporter(
        endpoint=f"127.0.0.1:{stack.grpc_port}", insecure=True, compression=grpc.Compression.Gzip
    )
    summary = send_demo_traces(exporter, traces=30, seed=11)
    stack.wait_stored(summary.trace_ids, summary.spans)
    ids = ",".join(f"'{t}'" for t in summary.trace_ids)
    rows = stack.process.sql(
        "SELECT GenAIOperation, count(), countIf(GenAIToolName != ''), "
        "countIf(GenAIToolCallId != ''), countIf(GenAIToolArguments != ''), "
        "countIf(GenAIInputTokens > 0), countIf(GenAIRequestModel != ''), "
        "countIf(GenAIAgentName != ''), countIf(GenAIConversationId != ''), "
        "countIf(ServiceName = 'support-agent') "
        f"FROM spans FINAL WHERE TraceId IN ({ids}) GROUP BY 1 ORDER BY 1"
    ).rows
    by_op = {row[0]: row[1:] for row in rows}
    assert set(by_op) == {"chat", "execute_tool", "invoke_agent"}
    chat, tool, agent = by_op["chat"], by_op["execute_tool"], by_op["invoke_agent"]
    assert agent[0] == 30 and agent[6] == 30 and agent[7] == 30
    assert tool[1] == tool[0] and tool[2] == tool[0] and tool[3] == tool[0]
    assert chat[4] == chat[0] and chat[5] == chat[0]
    assert all(row[-1] == row[1] for row in rows)


def test_official_http_exporter_gzip_protobuf(stack: Stack) -> None:
    exporter = HttpSpanExporter(endpoint=stack.http_url, compression=Compression.Gzip)
    summary = send_demo_traces(exporter, traces=25, seed=12)
    stack.wait_stored(summary.trace_ids, summary.spans)


@pytest.mark.parametrize("gzip_body", [False, True])
def test_raw_otlp_json_with_string_and_number_int64(stack: Stack, gzip_body: bool) -> None:
    trace_id = ("ab" if gzip_body else "cd") * 16
    t0 = 1_700_000_000_000_000_000
    name = "chat gpt-4o-mini"
    spans = [  # 64-bit integers as strings and as numbers: both are OTLP/JSON
        json_span(trace_id, "00f067aa0ba902b7", name, str(t0), t0 + 500_000_000),
        json_span(trace_id, "00f067aa0ba902b8", name, t0 + 10**9, str(t0 + 1_250_000_000)),
    ]
    status, body = post(
        stack.http_url, json_request(trace_id, spans), "application/json", gzip_body
    )
    assert status == 200, body
    assert json.loads(body).get("partialSuccess", {}).get("rejectedSpans", "0") in ("0", 0)
    stack.wait_stored([trace_id], 2)
    rows = stack.process.sql(
        "SELECT SpanId, Duration, SpanKind, StatusCode, GenAIOperation, GenAIInputTokens, "
        f"GenAIOutputTokens, ServiceName FROM spans FINAL WHERE TraceId = '{trace_id}' ORDER BY 1"
    ).rows
    assert rows == [
        ["00f067aa0ba902b7", 500_000_000, "Client", "Ok", "chat", 120, 30, "raw"],
        ["00f067aa0ba902b8", 250_000_000, "Client", "Ok", "chat", 120, 30, "raw"],
    ]


def test_a_bad_otlp_json_value_refuses_its_span_and_the_others_are_stored(stack: Stack) -> None:
    """Issue 38: an intValue of 2^70, a double of 1e400, a negative time, a lone surrogate
    in a key each refused the whole request (400). Now each refuses its own span, named in
    the partial success, and the good spans of the request are stored."""
    trace_id = "38" * 16
    t0 = 1_700_000_000_000_000_000
    spans = [json_span(trace_id, f"{n:016x}", "chat gpt-4o-mini", t0, t0 + n) for n in range(1, 7)]
    spans[1]["attributes"].append({"key": "big", "value": {"intValue": 2**70}})
    spans[2]["attributes"].append({"key": "huge", "value": {"doubleValue": "{1e400}"}})
    spans[3]["startTimeUnixNano"] = -5
    spans[4]["attributes"].append({"key": "\ud800", "value": {"stringValue": "x"}})
    request = json_request(trace_id, spans).replace(b'"{1e400}"', b"1e400")  # a JSON number
    status, body = post(stack.http_url, request, "application/json")
    assert status == 200, body
    partial = json.loads(body)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 4
    lines = partial["errorMessage"].split("; ")
    assert [line.split(" ")[1] for line in lines] == [f"{trace_id}/{n:016x}" for n in (2, 3, 4, 5)]
    assert "attributes[4].value.intValue: Value out of range" in lines[0]
    assert "attributes[4].value.doubleValue" in lines[1]
    assert "startTimeUnixNano: Value out of range: -5" in lines[2]
    assert "attributes[4].key: a lone surrogate" in lines[3]
    stack.wait_stored([trace_id], 2)
    stored = stack.process.sql(
        f"SELECT SpanId FROM spans FINAL WHERE TraceId = '{trace_id}' ORDER BY 1"
    ).rows
    assert stored == [[f"{1:016x}"], [f"{6:016x}"]]


def test_openinference_and_openllmetry_land_in_the_same_genai_columns(stack: Stack) -> None:
    shapes = {}
    for flavor in ("genai", "openinference", "openllmetry"):
        summary = send_demo_traces(
            HttpSpanExporter(endpoint=stack.http_url), traces=20, seed=5, flavor=flavor
        )
        stack.wait_stored(summary.trace_ids, summary.spans)
        ids = ",".join(f"'{t}'" for t in summary.trace_ids)
        shapes[flavor] = stack.process.sql(
            "SELECT GenAIOperation, count(), sum(GenAIInputTokens), sum(GenAIOutputTokens), "
            "groupUniqArray(GenAIToolName), countIf(GenAIRequestModel != '') "
            f"FROM spans FINAL WHERE TraceId IN ({ids}) GROUP BY 1 ORDER BY 1"
        ).rows
    for row in shapes["genai"]:
        row[4] = sorted(row[4])
    for flavor in ("openinference", "openllmetry"):
        for row in shapes[flavor]:
            row[4] = sorted(row[4])
        assert shapes[flavor] == shapes["genai"], flavor


def _span_pb(request: ExportTraceServiceRequest, trace_id: bytes, span_id: bytes, name: str,
             start: int, end: int) -> None:  # fmt: skip
    scope = request.resource_spans[0].scope_spans[0]
    span = scope.spans.add()
    span.trace_id, span.span_id, span.name = trace_id, span_id, name
    span.start_time_unix_nano, span.end_time_unix_nano = start, end


def mixed_request(good_trace: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add()
    _span_pb(request, good_trace, bytes.fromhex("1111111111111111"), "good", 10**18, 10**18 + 5)
    _span_pb(request, good_trace, bytes.fromhex("2222222222222222"), "ends early", 10**18, 10**17)
    _span_pb(request, bytes(16), bytes.fromhex("3333333333333333"), "zero trace", 10**18, 10**18)
    return request


def test_http_partial_success_names_span_and_field_and_keeps_good_spans(stack: Stack) -> None:
    trace = bytes.fromhex("0123456789abcdef0123456789abcdef")
    status, body = post(
        stack.http_url, mixed_request(trace).SerializeToString(), "application/x-protobuf"
    )
    assert status == 200
    response = ExportTraceServiceResponse.FromString(body)
    assert response.partial_success.rejected_spans == 2
    message = response.partial_success.error_message
    assert "2222222222222222" in message and "endTimeUnixNano" in message
    assert "traceId" in message
    stack.wait_stored([trace.hex()], 1)
    assert (
        stack.process.scalar(f"SELECT SpanName FROM spans WHERE TraceId = '{trace.hex()}'")
        == "good"
    )


def test_grpc_partial_success(stack: Stack) -> None:
    trace = bytes.fromhex("fedcba9876543210fedcba9876543210")
    with grpc.insecure_channel(f"127.0.0.1:{stack.grpc_port}") as channel:
        export = channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=ExportTraceServiceRequest.SerializeToString,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        response = export(mixed_request(trace), timeout=30)
    assert response.partial_success.rejected_spans == 2
    stack.wait_stored([trace.hex()], 1)


def test_http_body_over_limit_and_gzip_bomb_get_413(stack: Stack) -> None:
    status, body = post(stack.http_url, b"\0" * (MAX_BODY + 1), "application/x-protobuf")
    assert status == 413
    assert "max_body_bytes" in status_pb2.Status.FromString(body).message
    status, body = post(stack.http_url, b"\0" * (50 * MAX_BODY), "application/x-protobuf", True)
    assert status == 413


def test_grpc_message_over_limit_is_resource_exhausted(stack: Stack) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{stack.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        with pytest.raises(grpc.RpcError) as error:
            export(b"\x0a" + b"\0" * (MAX_BODY + 10), timeout=30)
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_malformed_bodies_get_400_and_invalid_argument_with_reason(stack: Stack) -> None:
    status, body = post(stack.http_url, b"\xff\xff\xff", "application/x-protobuf")
    assert status == 400
    assert "invalid OTLP protobuf" in status_pb2.Status.FromString(body).message
    status, body = post(stack.http_url, b'{"resourceSpans": [', "application/json")
    assert status == 400
    assert "line 1" in json.loads(body)["message"]
    status, body = post(
        stack.http_url, json_request("xyz", [json_span("xyz", "00", "n", 1, 2)]), "application/json"
    )
    assert status == 400
    assert "traceId" in json.loads(body)["message"]
    with grpc.insecure_channel(f"127.0.0.1:{stack.grpc_port}") as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        with pytest.raises(grpc.RpcError) as error:
            export(b"\xff\xff\xff", timeout=30)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid OTLP protobuf" in error.value.details()


def test_no_raw_email_or_card_reaches_the_topic(stack: Stack, tmp_path: Path) -> None:
    summary = send_demo_traces(HttpSpanExporter(endpoint=stack.http_url), traces=40, seed=3)
    stack.wait_stored(summary.trace_ids, summary.spans)
    state = json.loads((stack.process.data_dir / "stack.json").read_text())
    consumer = KafkaConsumer(
        SPANS_TOPIC,
        bootstrap_servers=state["kafka"],
        group_id=f"redaction-check-{tmp_path.name}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        consumer_timeout_ms=5000,
    )
    values = [message.value for message in consumer]
    consumer.close()
    assert len(values) >= len(summary.trace_ids)
    everything = b"".join(values)
    assert b"[REDACTED:email]" in everything  # the demo's messages carried addresses
    assert b"@example.com" not in everything
    assert b"4111 1111 1111 1111" not in everything and b"4111111111111111" not in everything
