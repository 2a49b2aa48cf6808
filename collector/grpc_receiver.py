"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export` and
`opentelemetry.proto.collector.logs.v1.LogsService/Export`, under the same limits, answers
and authentication (a logs request's partial success counts `rejected_log_records`).

The request is parsed here, not by gRPC, so malformed protobuf is INVALID_ARGUMENT with
the parser's reason (values nested past protobuf's 100 message levels included). gRPC
enforces the size limit on the decompressed message (RESOURCE_EXHAUSTED). A full spill
answers UNAVAILABLE with a `google.rpc.RetryInfo`.

Requests run on a fixed pool of `workers` threads; connections are served by gRPC's own
event loop, hold no thread, and are closed after `idle_timeout_s` without a call. A call
waits for Kafka until `ack_timeout_s` after it started, or until shortly before the
client's own deadline when that comes first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent import futures

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError, Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from pathgrade.collector.otlp_json import LOGS, TRACES, Signal
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.spill import SpillFull
from pathgrade.transport.bearer_tokens import TokenAuth, Unauthenticated

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
ANSWER_MARGIN_S = 0.5
"""How long before the client's deadline a call stops waiting for Kafka, to answer."""


class TraceServiceHandler:
    """The Export method of both services over raw request bytes (`export`: traces,
    `export_logs`: logs)."""

    def __init__(self, pipeline: IngestPipeline, auth: TokenAuth, ack_timeout_s: float) -> None:
        self.pipeline = pipeline
        self.auth = auth
        self.ack_timeout_s = ack_timeout_s

    def export(self, raw: bytes, context: grpc.ServicerContext) -> Message:
        """TraceService/Export."""
        return self._export(raw, context, TRACES)

    def export_logs(self, raw: bytes, context: grpc.ServicerContext) -> Message:
        """LogsService/Export."""
        return self._export(raw, context, LOGS)

    def _export(self, raw: bytes, context: grpc.ServicerContext, signal: Signal) -> Message:
        started = time.monotonic()
        remaining = context.time_remaining()  # None without a client deadline
        budget = self.ack_timeout_s if remaining is None else remaining - ANSWER_MARGIN_S
        deadline = started + min(self.ack_timeout_s, budget)
        metadata = dict(context.invocation_metadata())
        try:
            tenant = self.auth.tenant(metadata.get("authorization"))
        except Unauthenticated as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        request = signal.request()
        try:
            request.ParseFromString(raw)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid OTLP protobuf: {exc}")
        ingest = self.pipeline.ingest_logs if signal is LOGS else self.pipeline.ingest
        try:
            result = ingest(request, tenant, deadline, raw)
        except SpillFull as exc:
            _abort_unavailable(context, str(exc), exc.retry_after_s)
        response = signal.response()
        if result.rejected_spans:
            setattr(response.partial_success, signal.rejected_field, result.rejected_spans)
            response.partial_success.error_message = result.error_message
        return response


def _abort_unavailable(context: grpc.ServicerContext, message: str, retry_after_s: int) -> None:
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=retry_after_s))
    detail = any_pb2.Any()
    detail.Pack(retry)
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=message, details=[detail])
    context.abort_with_status(_RichStatus(status))


class _RichStatus(grpc.Status):
    """A gRPC status carrying `google.rpc.Status` details in the trailing metadata."""

    def __init__(self, status: status_pb2.Status) -> None:
        self.code = grpc.StatusCode.UNAVAILABLE
        self.details = status.message
        self.trailing_metadata = (("grpc-status-details-bin", status.SerializeToString()),)


def _service(name: str, export: Callable[..., Message]) -> grpc.GenericRpcHandler:
    """A service `name` whose Export method is `export` (over the raw request bytes)."""
    method = grpc.unary_unary_rpc_method_handler(
        export, request_deserializer=None, response_serializer=_serialized
    )
    return grpc.method_handlers_generic_handler(name, {"Export": method})


def _serialized(response: Message) -> bytes:
    return response.SerializeToString()


def start_grpc_server(
    handler: TraceServiceHandler,
    host: str,
    port: int,
    max_body_bytes: int,
    workers: int = 32,
    idle_timeout_s: float = 60.0,
) -> tuple[grpc.Server, int]:
    """Start serving; returns the server and the bound port. Raises OSError if in use."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="otlp-grpc"),
        options=[
            ("grpc.max_receive_message_length", max_body_bytes),
            ("grpc.so_reuseport", 0),
            ("grpc.max_connection_idle_ms", int(idle_timeout_s * 1000)),
        ],
    )
    exports = ((SERVICE, handler.export), (LOGS_SERVICE, handler.export_logs))
    server.add_generic_rpc_handlers(tuple(_service(service, export) for service, export in exports))
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: the port is in use")
    server.start()
    return server, bound
