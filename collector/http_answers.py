"""The OTLP/HTTP receiver's refusals as the specification asks: a `google.rpc.Status` body
in the request's content type (JSON when it is unknown), with the gRPC code of each HTTP
status. Shared by the connection (refusals before a request is read: a head that stops
coming, one the parser cannot read) and the request handler."""

from __future__ import annotations

import json
from http import HTTPStatus

from google.rpc import code_pb2, status_pb2

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRANSFER_ENCODING_REFUSED = (
    "Transfer-Encoding is not supported; send the body with a Content-Length"
)

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


def status_body(status: HTTPStatus, message: str, content_type: str) -> bytes:
    """A `google.rpc.Status` of `status` carrying `message`, encoded as `content_type`
    (JSON or protobuf)."""
    code = _RPC_CODES.get(status, code_pb2.UNKNOWN)
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode("utf-8", "backslashreplace").decode()  # no lone surrogates
    return status_pb2.Status(code=code, message=text).SerializeToString()


def raw_answer(status: HTTPStatus, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response closing the connection, with a JSON status body: what the
    connection writes itself, before any request handler exists."""
    body = status_body(status, message, JSON)
    lines = [
        f"HTTP/1.1 {status.value} {status.phrase}",
        f"Content-Type: {JSON}",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in (headers or {}).items()),
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body
