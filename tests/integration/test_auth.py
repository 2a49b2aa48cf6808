"""Bearer tokens decide the tenant; a span attribute never does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from pathgrade.demo.sender import send_demo_traces
from tests.integration.conftest import PathgradeProcess, start_stack, wait_until
from tests.integration.test_ingest import EXPORT_METHOD, post

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PathgradeProcess, int, int]]:
    data_dir = tmp_path_factory.mktemp("auth")
    tokens = data_dir / "tokens.yaml"
    tokens.write_text("s3cret-acme: acme\ns3cret-globex: globex\n")
    stack = start_stack(data_dir / "store", "--tokens-file", str(tokens))
    yield stack
    assert stack[0].terminate() == 0


def tenant_request(trace_id: str) -> bytes:
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes.fromhex(trace_id), bytes.fromhex("1234567812345678")
    span.name, span.start_time_unix_nano, span.end_time_unix_nano = (
        "invoke_agent",
        10**18,
        2 * 10**18,
    )
    for key in ("tenant", "pathgrade.tenant"):  # a span attribute must not set the tenant
        attribute = span.attributes.add()
        attribute.key, attribute.value.string_value = key, "globex"
    return request.SerializeToString()


def test_http_without_or_with_unknown_token_is_401(
    secured: tuple[PathgradeProcess, int, int],
) -> None:
    url = f"http://127.0.0.1:{secured[2]}/v1/traces"
    body = tenant_request("aa" * 16)
    assert post(url, body, "application/x-protobuf")[0] == 401
    assert post(url, body, "application/x-protobuf", token="wrong")[0] == 401


def test_grpc_without_token_is_unauthenticated(secured: tuple[PathgradeProcess, int, int]) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{secured[1]}") as channel:
        export = channel.unary_unary(EXPORT_METHOD)
        with pytest.raises(grpc.RpcError) as missing:
            export(tenant_request("bb" * 16), timeout=30)
        with pytest.raises(grpc.RpcError) as unknown:
            export(tenant_request("bb" * 16), timeout=30, metadata=[("authorization", "Bearer x")])
    assert missing.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert unknown.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_token_sets_tenant_and_span_attribute_does_not(
    secured: tuple[PathgradeProcess, int, int],
) -> None:
    stack, _, http_port = secured
    url = f"http://127.0.0.1:{http_port}/v1/traces"
    trace_id = "cc" * 16
    status, _ = post(url, tenant_request(trace_id), "application/x-protobuf", token="s3cret-acme")
    assert status == 200
    tenant = wait_until(
        lambda: stack.sql(f"SELECT Tenant FROM spans WHERE TraceId = '{trace_id}'").rows, 60
    )
    assert tenant == [["acme"]]


def test_official_exporter_with_token_and_default_redaction(
    secured: tuple[PathgradeProcess, int, int],
) -> None:
    stack, _, http_port = secured
    exporter = OTLPSpanExporter(
        endpoint=f"http://127.0.0.1:{http_port}/v1/traces",
        headers={"authorization": "Bearer s3cret-globex"},
    )
    summary = send_demo_traces(exporter, traces=10, seed=4)
    ids = ",".join(f"'{t}'" for t in summary.trace_ids)
    query = (
        "SELECT count(), countIf(Tenant = 'globex'), countIf(GenAIToolArguments != ''), "
        "countIf(GenAIInputMessages != ''), countIf(GenAIToolName != '') "
        f"FROM spans FINAL WHERE TraceId IN ({ids})"
    )
    wait_until(lambda: stack.sql(query).rows[0][0] == summary.spans, 60)
    total, globex, arguments, messages, tools = stack.sql(query).rows[0]
    assert globex == total
    # Capture is opt-in: with no --capture-tools / --capture-messages no content is kept,
    # while the tool names (not content) still land in their column.
    assert arguments == 0 and messages == 0 and tools > 0


def test_second_stack_on_the_same_data_dir_is_refused(
    secured: tuple[PathgradeProcess, int, int], tmp_path: Path
) -> None:
    stack = secured[0]
    assert stack.data_dir is not None
    with pytest.raises(AssertionError, match="owned by another running pathgrade stack"):
        start_stack(stack.data_dir)


def test_port_in_use_is_a_clear_error(
    secured: tuple[PathgradeProcess, int, int], tmp_path: Path
) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "up", "--data-dir", str(tmp_path),
         "--grpc-port", "0", "--http-port", str(secured[2])],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"cannot listen for OTLP/HTTP on 127.0.0.1:{secured[2]}" in result.stderr
    assert "--http-port" in result.stderr


def test_unreachable_kafka_and_clickhouse_are_clear_errors(tmp_path: Path) -> None:
    import subprocess
    import sys

    from pathgrade.stack.broker import free_port

    nobody = f"127.0.0.1:{free_port()}"
    kafka = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "up", "--data-dir", str(tmp_path / "a"),
         "--grpc-port", "0", "--http-port", "0", "--kafka", nobody],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert kafka.returncode == 2
    assert f"cannot reach Kafka at {nobody}: no answer to a metadata request in 10 s" in (
        kafka.stderr
    )
    clickhouse = subprocess.run(
        [sys.executable, "-m", "pathgrade.cli", "sql", "--clickhouse",
         f"http://user:secret@{nobody}/db", "SELECT 1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert clickhouse.returncode == 2
    assert "cannot reach ClickHouse at http://user:***@" in clickhouse.stderr
    assert "secret" not in clickhouse.stderr
