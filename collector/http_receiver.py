"""OTLP/HTTP receiver: `POST /v1/traces`, protobuf or JSON, optionally gzip-compressed.

Answers in the request's content type; errors carry a `google.rpc.Status` body as the
OTLP/HTTP specification asks (400 malformed, 401 unauthenticated, 413 too large,
415 unsupported type, 503 with Retry-After when Kafka and the spill are both full).
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pathgrade.collector.auth import TokenAuth, Unauthenticated
from pathgrade.collector.limits import BodyTooLarge, MalformedBody, decompress_bounded
from pathgrade.collector.otlp_json import OtlpJsonError, parse_export_request_json, response_json
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.spill import SpillFull

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
MAX_DISCARD_BYTES = 1 << 30  # a refused body larger than this closes the connection instead

_RPC_CODES = {
    HTTPStatus.BAD_REQUEST: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.UNAUTHORIZED: code_pb2.UNAUTHENTICATED,
    HTTPStatus.NOT_FOUND: code_pb2.NOT_FOUND,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.SERVICE_UNAVAILABLE: code_pb2.UNAVAILABLE,
}


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class OtlpHttpServer(ThreadingHTTPServer):
    """A threading HTTP/1.1 server carrying the collector's pipeline and limits."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        pipeline: IngestPipeline,
        auth: TokenAuth,
        max_body_bytes: int,
    ) -> None:
        self.pipeline = pipeline
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        super().__init__(address, _OtlpHandler)


class _OtlpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OtlpHttpServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        answer_type = JSON if content_type == JSON else PROTOBUF
        try:
            if self.path.split("?")[0] != TRACES_PATH:
                raise _HttpError(
                    HTTPStatus.NOT_FOUND, f"no such path {self.path}; use {TRACES_PATH}"
                )
            if content_type not in (PROTOBUF, JSON):
                raise _HttpError(
                    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                    f"Content-Type {content_type or '(none)'} is not supported; "
                    f"use {PROTOBUF} or {JSON}",
                )
            tenant = self._tenant()
            request = self._read_request(content_type)
            result = self.server.pipeline.ingest(request, tenant)
        except _HttpError as exc:
            self._send_status(exc.status, str(exc), answer_type, exc.headers)
            return
        except SpillFull as exc:
            self._send_status(
                HTTPStatus.SERVICE_UNAVAILABLE,
                str(exc),
                answer_type,
                {"Retry-After": str(exc.retry_after_s)},
            )
            return
        if answer_type == JSON:
            body = response_json(result.rejected_spans, result.error_message)
        else:
            response = ExportTraceServiceResponse()
            if result.rejected_spans:
                response.partial_success.rejected_spans = result.rejected_spans
                response.partial_success.error_message = result.error_message
            body = response.SerializeToString()
        self._send(HTTPStatus.OK, body, answer_type)

    def do_GET(self) -> None:
        self._send_status(HTTPStatus.NOT_FOUND, f"POST OTLP traces to {TRACES_PATH}", JSON, {})

    def _tenant(self) -> str:
        try:
            return self.server.auth.tenant(self.headers.get("Authorization"))
        except Unauthenticated as exc:
            self.close_connection = True
            raise _HttpError(HTTPStatus.UNAUTHORIZED, str(exc)) from exc

    def _read_request(self, content_type: str) -> ExportTraceServiceRequest:
        limit = self.server.max_body_bytes
        length_header = self.headers.get("Content-Length")
        if length_header is None:
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        length = int(length_header)
        if length > limit:
            self._discard_body(length)
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(BodyTooLarge(limit)))
        raw = self.rfile.read(length)
        try:
            body = decompress_bounded(raw, self.headers.get("Content-Encoding"), limit)
        except BodyTooLarge as exc:
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc)) from exc
        except MalformedBody as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
        if content_type == JSON:
            try:
                return parse_export_request_json(body)
            except OtlpJsonError as exc:
                raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP/JSON: {exc}") from exc
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP protobuf: {exc}") from exc
        return request

    def _discard_body(self, length: int) -> None:
        """Read and drop a refused body in small chunks, so the client sees the answer
        rather than a broken pipe; a body beyond MAX_DISCARD_BYTES closes the connection."""
        if length > MAX_DISCARD_BYTES:
            self.close_connection = True
            return
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                break
            length -= len(chunk)

    def _send_status(
        self, status: HTTPStatus, message: str, answer_type: str, headers: dict[str, str]
    ) -> None:
        code = _RPC_CODES.get(status, code_pb2.UNKNOWN)
        if answer_type == JSON:
            body = json.dumps({"code": code, "message": message}).encode()
        else:
            body = status_pb2.Status(code=code, message=message).SerializeToString()
        self._send(status, body, answer_type, headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
