"""OTLP/HTTP receiver: `POST /v1/traces`, protobuf or JSON, optionally gzip-compressed.

Answers in the request's content type; errors carry a `google.rpc.Status` body as the
OTLP/HTTP specification asks (400 malformed, 401 unauthenticated, 408 a request not
completed in time, 411 no Content-Length, 413 too large, 415 unsupported type, 431
headers too large, 503 with Retry-After when Kafka and the spill are both full). Every
request gets an answer, also one the HTTP parser refuses; a refusal that leaves a body
unread closes the connection, so the body is never read as the next request.

Requests run on a bounded pool of threads (`collector.http_server`): idle connections
hold no thread and are closed after `idle_timeout_s`.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pathgrade.collector.auth import TokenAuth, Unauthenticated
from pathgrade.collector.http_server import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_WORKERS,
    PooledHTTPServer,
    PooledRequestHandler,
)
from pathgrade.collector.limits import BodyTooLarge, MalformedBody, decompress_bounded
from pathgrade.collector.otlp_json import OtlpJsonError, parse_export_request_json, response_json
from pathgrade.collector.pipeline import IngestPipeline
from pathgrade.collector.spill import SpillFull
from pathgrade.schemas.numbers import parse_index

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACES_PATH = "/v1/traces"
MAX_DISCARD_BYTES = 1 << 30  # a refused body larger than this closes the connection instead
_READ_CHUNK_BYTES = 1 << 20

_RPC_CODES = {
    HTTPStatus.BAD_REQUEST: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.UNAUTHORIZED: code_pb2.UNAUTHENTICATED,
    HTTPStatus.NOT_FOUND: code_pb2.NOT_FOUND,
    HTTPStatus.METHOD_NOT_ALLOWED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.NOT_IMPLEMENTED: code_pb2.UNIMPLEMENTED,
    HTTPStatus.REQUEST_TIMEOUT: code_pb2.DEADLINE_EXCEEDED,
    HTTPStatus.LENGTH_REQUIRED: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.REQUEST_URI_TOO_LONG: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE: code_pb2.INVALID_ARGUMENT,
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: code_pb2.RESOURCE_EXHAUSTED,
    HTTPStatus.INTERNAL_SERVER_ERROR: code_pb2.INTERNAL,
    HTTPStatus.SERVICE_UNAVAILABLE: code_pb2.UNAVAILABLE,
    HTTPStatus.HTTP_VERSION_NOT_SUPPORTED: code_pb2.INVALID_ARGUMENT,
}


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class OtlpHttpServer(PooledHTTPServer):
    """The pooled HTTP/1.1 server carrying the collector's pipeline and limits."""

    def __init__(
        self,
        address: tuple[str, int],
        pipeline: IngestPipeline,
        auth: TokenAuth,
        max_body_bytes: int,
        ack_timeout_s: float = 5.0,
        workers: int = DEFAULT_WORKERS,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
    ) -> None:
        self.pipeline = pipeline
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.ack_timeout_s = ack_timeout_s
        super().__init__(address, _OtlpHandler, workers, idle_timeout_s, read_timeout_s)


class _OtlpHandler(PooledRequestHandler):
    server: OtlpHttpServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        answer_type = JSON if content_type == JSON else PROTOBUF
        self._body_read = False
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
            request, body = self._read_request(content_type)
            deadline = self.ready_at + self.server.ack_timeout_s
            result = self.server.pipeline.ingest(request, tenant, deadline, body)
        except _HttpError as exc:
            self._refuse(exc.status, str(exc), answer_type, exc.headers)
            return
        except SpillFull as exc:
            headers = {"Retry-After": str(exc.retry_after_s)}
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), answer_type, headers)
            return
        except Exception as exc:  # a bug must still get an answer, and the log its trace
            log.exception("OTLP/HTTP request failed")
            message = f"internal error: {type(exc).__name__}: {exc}"
            self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, message, answer_type, {})
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
        self._body_read = False
        self._refuse(HTTPStatus.NOT_FOUND, f"POST OTLP traces to {TRACES_PATH}", JSON, {})

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The HTTP parser's refusals (bad request line, 414, 431, 505, unsupported
        method) as google.rpc.Status JSON, closing the connection."""
        status = HTTPStatus(code)
        text = "; ".join(part for part in (message or status.phrase, explain) if part)
        self._body_read = False
        self._refuse(status, text, JSON, {})

    def timed_out_answer(self) -> tuple[bytes, str]:
        """The 408 for a request whose head stopped coming, as google.rpc.Status JSON."""
        message = f"request not completed within {self.timeout:g} s"
        code = _RPC_CODES[HTTPStatus.REQUEST_TIMEOUT]
        return json.dumps({"code": code, "message": message}).encode(), JSON

    def _tenant(self) -> str:
        try:
            return self.server.auth.tenant(self.headers.get("Authorization"))
        except Unauthenticated as exc:
            raise _HttpError(HTTPStatus.UNAUTHORIZED, str(exc)) from exc

    def _content_length(self) -> int:
        """The one Content-Length, a decimal integer; refuses chunked bodies (unframed
        for this server) and conflicting or malformed lengths."""
        if self.headers.get("Transfer-Encoding"):
            raise _HttpError(
                HTTPStatus.LENGTH_REQUIRED,
                "Transfer-Encoding is not supported; send the body with a Content-Length",
            )
        values = self.headers.get_all("Content-Length") or []
        if not values:
            raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
        if len({value.strip() for value in values}) > 1:
            raise _HttpError(
                HTTPStatus.BAD_REQUEST, f"conflicting Content-Length headers: {values!r}"
            )
        length = parse_index(values[0].strip())
        if length is None:
            raise _HttpError(
                HTTPStatus.BAD_REQUEST,
                f"Content-Length must be a non-negative decimal integer, got {values[0]!r}",
            )
        return length

    def _read_request(self, content_type: str) -> tuple[ExportTraceServiceRequest, bytes | None]:
        """The request of the body, and the body when it came as protobuf."""
        limit = self.server.max_body_bytes
        length = self._content_length()
        if length > limit:
            self._discard_body(length)
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(BodyTooLarge(limit)))
        raw = self._read_body(length)
        try:
            body = decompress_bounded(raw, self.headers.get("Content-Encoding"), limit)
        except BodyTooLarge as exc:
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc)) from exc
        except MalformedBody as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
        if content_type == JSON:
            try:
                return parse_export_request_json(body), None
            except OtlpJsonError as exc:
                raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP/JSON: {exc}") from exc
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP protobuf: {exc}") from exc
        return request, body

    def _read_body(self, length: int) -> bytes:
        """Exactly `length` body bytes; 408 when they stop coming, 400 when the client
        ends the body early."""
        chunks: list[bytes] = []
        received = 0
        try:
            while received < length:
                chunk = self.rfile.read1(min(length - received, _READ_CHUNK_BYTES))
                if not chunk:
                    break
                chunks.append(chunk)
                received += len(chunk)
        except TimeoutError as exc:
            raise _HttpError(
                HTTPStatus.REQUEST_TIMEOUT,
                f"body not completed: {received} of {length} bytes, then nothing for "
                f"{self.timeout:g} s",
            ) from exc
        if received < length:
            raise _HttpError(
                HTTPStatus.BAD_REQUEST,
                f"body ended after {received} of the {length} bytes Content-Length announced",
            )
        self._body_read = True
        return b"".join(chunks)

    def _discard_body(self, length: int) -> None:
        """Read and drop a refused body in small chunks, so the client sees the answer
        rather than a broken pipe; a body beyond MAX_DISCARD_BYTES closes the connection."""
        if length > MAX_DISCARD_BYTES:
            return
        try:
            while length > 0:
                chunk = self.rfile.read(min(length, 1 << 16))
                if not chunk:
                    return
                length -= len(chunk)
        except TimeoutError:
            return
        self._body_read = True

    def _refuse(
        self, status: HTTPStatus, message: str, answer_type: str, headers: dict[str, str]
    ) -> None:
        """Answer an error; close the connection when the body was not read (its bytes
        would otherwise be read as the next request) or the client must re-authenticate."""
        if not self._body_read or status == HTTPStatus.UNAUTHORIZED:
            self.close_connection = True
        code = _RPC_CODES.get(status, code_pb2.UNKNOWN)
        if answer_type == JSON:
            body = json.dumps({"code": code, "message": message}).encode()
        else:
            text = message.encode("utf-8", "backslashreplace").decode()  # no lone surrogates
            body = status_pb2.Status(code=code, message=text).SerializeToString()
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
