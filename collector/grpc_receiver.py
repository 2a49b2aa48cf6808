"""OTLP/gRPC receiver: `opentelemetry.proto.collector.trace.v1.TraceService/Export`.

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
from concurrent import futures

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pathgrade.collector.auth import TokenAuth, Unauthenticated
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.spill import SpillFull

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
ANSWER_MARGIN_S = 0.5
"""How long before the client's deadline a call stops waiting for Kafka, to answer."""


class TraceServiceHandler:
    """The Export method over raw request bytes."""

    def __init__(self, pipeline: IngestPipeline, auth: TokenAuth, ack_timeout_s: float) -> None:
        self.pipeline = pipeline
        self.auth = auth
        self.ack_timeout_s = ack_timeout_s

    def export(self, raw: bytes, context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        started = time.monotonic()
        remaining = context.time_remaining()  # None without a client deadline
        budget = self.ack_timeout_s if remaining is None else remaining - ANSWER_MARGIN_S
        deadline = started + min(self.ack_timeout_s, budget)
        metadata = dict(context.invocation_metadata())
        try:
            tenant = self.auth.tenant(metadata.get("authorization"))
        except Unauthenticated as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(raw)
        except DecodeError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid OTLP protobuf: {exc}")
        try:
            result = self.pipeline.ingest(request, tenant, deadline, raw)
        except SpillFull as exc:
            _abort_unavailable(context, str(exc), exc.retry_after_s)
        response = ExportTraceServiceResponse()
        if result.rejected_spans:
            response.partial_success.rejected_spans = result.rejected_spans
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
    method = grpc.unary_unary_rpc_method_handler(
        handler.export,
        request_deserializer=None,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Export": method}),)
    )
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: {exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen for OTLP/gRPC on {host}:{port}: the port is in use")
    server.start()
    return server, bound
