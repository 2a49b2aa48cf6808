"""OTLP/HTTP receiver: `POST /v1/traces` and `POST /v1/logs`, protobuf or JSON, optionally
gzip-compressed; both paths under the same limits, answers and authentication (a logs
request's partial success counts `rejectedLogRecords`).

Answers in the request's content type; errors carry a `google.rpc.Status` body as the
OTLP/HTTP specification asks (400 malformed, 401 unauthenticated, 408 a request not
completed in time, 411 no Content-Length, 413 too large, 415 unsupported type, 431
headers too large, 503 with Retry-After when Kafka and the spill are both full or bodies
fill the memory they may take). Every request gets an answer, also one the HTTP parser
refuses; a refusal that leaves a body unread closes the connection. An OTLP/JSON span
holding a value no field can hold is refused alone (partial success naming it), as the
protobuf path refuses an invalid span; a JSON request none of whose spans decodes is a 400.

Connections are uvicorn's (`collector.http_server`: idle and head bounds). The body is
read on the event loop and must keep coming: every `read_timeout_s` it must bring
`min_body_rate` x `read_timeout_s` bytes, or the rest of it (408 otherwise), so a client
that drips bytes is cut within `read_timeout_s` of its last quota, whatever it sent
before or announced. Only a whole body goes to the pool of `receiver_workers` threads
that decompress, parse, validate and publish it, so a slow or idle connection never holds
a worker. Bodies held in memory
(arriving or waiting for a worker) take at most `receiver_workers` x `max_body_bytes`
bytes: a request whose Content-Length would take them past that is answered 503 with
Retry-After.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from google.protobuf.message import DecodeError
from pathgrade.collector.http_answers import (
    JSON,
    PROTOBUF,
    TRANSFER_ENCODING_REFUSED,
    status_body,
)
from pathgrade.collector.http_server import EXCHANGE, ConnectionLimits, Exchange, UvicornServer
from pathgrade.collector.limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MIN_BODY_RATE,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_WORKERS,
    BodyTooLarge,
    MalformedBody,
    decompress_bounded,
)
from pathgrade.collector.otlp_json import (
    LOGS,
    TRACES,
    OtlpJsonError,
    Signal,
    decode_export_request_json,
    response_json,
)
from pathgrade.collector.pipeline import IngestPipeline, IngestResult
from pathgrade.collector.spill import SpillFull
from pathgrade.collector.validate import Rejections
from pathgrade.transport.bearer_tokens import TokenAuth, Unauthenticated

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
SIGNALS = {TRACES_PATH: TRACES, LOGS_PATH: LOGS}
"""The paths the receiver takes, and the signal each carries."""
MAX_DISCARD_BYTES = 1 << 30  # a refused body larger than this closes the connection instead
MEMORY_RETRY_AFTER_S = 1
"""Retry-After of a 503 for bodies filling the memory they may take."""

_Send = Callable[[dict[str, Any]], Awaitable[None]]
_Receive = Callable[[], Awaitable[dict[str, Any]]]


class _HttpError(Exception):
    def __init__(self, status: HTTPStatus, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class _ClientGone(Exception):
    """The connection closed before the request was read."""


@dataclass(slots=True)
class _Answer:
    status: HTTPStatus
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)
    close: bool = False


@dataclass(frozen=True, slots=True)
class _Request:
    """What a worker needs of a request read whole."""

    body: bytes
    content_type: str
    content_encoding: str | None
    tenant: str
    deadline: float
    signal: Signal


class _BodyBudget:
    """Bytes of request bodies held in memory (arriving, or waiting for a worker);
    touched on the event loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def admits(self, length: int) -> bool:
        return self.held + length <= self.limit


class OtlpHttpServer:
    """The OTLP/HTTP receiver on `address`: `serve_forever()` in one thread,
    `shutdown()` from another (requests being processed finish), then `server_close()`."""

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
        min_body_rate: int = DEFAULT_MIN_BODY_RATE,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="otlp-http")
        app = _OtlpApp(
            pipeline, auth, max_body_bytes, ack_timeout_s, read_timeout_s, min_body_rate,
            _BodyBudget(workers * max_body_bytes), self._pool,
        )  # fmt: skip
        limits = ConnectionLimits(idle_timeout_s, read_timeout_s, max_connections)
        self._server = UvicornServer(address, app, limits, grace_s=ack_timeout_s + 2)
        self.server_address = self._server.server_address

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def shutdown(self) -> None:
        self._server.shutdown()

    def server_close(self) -> None:
        self._server.server_close()
        self._pool.shutdown(wait=True)


class _OtlpApp:
    """The ASGI application: reads each request whole on the event loop, has a worker
    process it, answers."""

    def __init__(
        self,
        pipeline: IngestPipeline,
        auth: TokenAuth,
        max_body_bytes: int,
        ack_timeout_s: float,
        read_timeout_s: float,
        min_body_rate: int,
        budget: _BodyBudget,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.pipeline = pipeline
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.ack_timeout_s = ack_timeout_s
        self.read_timeout_s = read_timeout_s
        self.min_body_rate = min_body_rate
        self.budget = budget
        self.pool = pool

    async def __call__(self, scope: dict[str, Any], receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        try:
            answer = await self._answer(scope, receive)
        except _ClientGone:
            return
        except Exception as exc:  # a bug must still get an answer, and the log its trace
            answer = _internal_error(exc, JSON)
            answer.close = True
        headers = [
            (b"content-type", answer.content_type.encode()),
            (b"content-length", str(len(answer.body)).encode()),
            *((name.encode(), value.encode()) for name, value in answer.headers.items()),
        ]
        if answer.close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    async def _answer(self, scope: dict[str, Any], receive: _Receive) -> _Answer:
        """The answer to one request (a refusal names its reason)."""
        headers = _headers(scope)
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        answer_type = JSON if content_type == JSON else PROTOBUF
        exchange: Exchange = scope["extensions"][EXCHANGE]
        body_read = False
        if scope["method"] != "POST":
            answer_type = JSON
        try:
            _check_route(scope, content_type)
            tenant = self._tenant(headers)
            length = _content_length(headers)
            if length > self.max_body_bytes:
                body_read = await self._discard_body(receive, length, exchange)
                raise _HttpError(
                    HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(BodyTooLarge(self.max_body_bytes))
                )
            if not self.budget.admits(length):
                raise _HttpError(
                    HTTPStatus.SERVICE_UNAVAILABLE,
                    f"request bodies fill the memory they may take "
                    f"({self.budget.limit} bytes); retry shortly",
                    {"Retry-After": str(MEMORY_RETRY_AFTER_S)},
                )
            request = _Request(
                await self._read_body(receive, length, exchange), content_type,
                headers.get("content-encoding"), tenant, exchange.head_at + self.ack_timeout_s,
                SIGNALS[scope["path"]],
            )  # fmt: skip
            body_read = True
            exchange.processing()
            try:
                loop = asyncio.get_running_loop()
                return await loop.run_in_executor(self.pool, self._process, request)
            finally:
                self.budget.held -= len(request.body)
        except _HttpError as exc:
            close = not body_read or exc.status == HTTPStatus.UNAUTHORIZED
            body = status_body(exc.status, str(exc), answer_type)
            return _Answer(exc.status, body, answer_type, exc.headers, close)

    def _tenant(self, headers: dict[str, str]) -> str:
        try:
            return self.auth.tenant(headers.get("authorization"))
        except Unauthenticated as exc:
            raise _HttpError(HTTPStatus.UNAUTHORIZED, str(exc)) from exc

    async def _read_body(self, receive: _Receive, length: int, exchange: Exchange) -> bytes:
        """The body, held against the budget; 408 when it stops coming or comes too
        slowly, 400 when the client ends it early."""
        chunks: list[bytes] = []
        try:
            await self._receive_body(receive, length, exchange, chunks.append)
        except BaseException:
            self.budget.held -= sum(map(len, chunks))
            raise
        return b"".join(chunks)

    async def _discard_body(self, receive: _Receive, length: int, exchange: Exchange) -> bool:
        """Read and drop a refused body, so the client sees the answer rather than a
        broken pipe; False (close the connection) past MAX_DISCARD_BYTES or when it does
        not arrive in time."""
        if length > MAX_DISCARD_BYTES:
            return False
        try:
            await self._receive_body(receive, length, exchange, None)
        except _HttpError:
            return False
        return True

    async def _receive_body(
        self,
        receive: _Receive,
        length: int,
        exchange: Exchange,
        keep: Callable[[bytes], None] | None,
    ) -> None:
        """Receive `length` body bytes, giving each chunk to `keep` (counted against the
        budget) when given. The body's bound (the module's docstring): each window of
        `read_timeout_s` must bring its quota, `min_body_rate` x `read_timeout_s` bytes
        or the rest of the body; a window whose quota is met starts the next."""
        loop = asyncio.get_running_loop()
        quota = self.min_body_rate * self.read_timeout_s
        window_end = loop.time() + self.read_timeout_s
        window_start_bytes = received = 0
        more = length > 0
        while more:
            try:
                async with asyncio.timeout_at(window_end):
                    message = await receive()
            except TimeoutError:
                late = self._late(received, length, received - window_start_bytes)
                raise _HttpError(HTTPStatus.REQUEST_TIMEOUT, late) from None
            if message["type"] == "http.disconnect":
                raise _ClientGone
            chunk = message.get("body", b"")
            if chunk:
                received += len(chunk)
                if keep is not None:
                    self.budget.held += len(chunk)
                    keep(chunk)
                if received - window_start_bytes >= min(quota, length - window_start_bytes):
                    window_start_bytes = received
                    window_end = loop.time() + self.read_timeout_s
            more = message.get("more_body", False)
            if more and exchange.ended_early:
                raise _HttpError(
                    HTTPStatus.BAD_REQUEST,
                    f"body ended after {received} of the {length} bytes Content-Length announced",
                )

    def _late(self, received: int, length: int, window_bytes: int) -> str:
        """The 408's reason: the body stopped coming, or came too slowly."""
        if not window_bytes:
            return (
                f"body not completed: {received} of {length} bytes, then nothing for "
                f"{self.read_timeout_s:g} s"
            )
        return (
            f"body not completed: {received} of {length} bytes, the last {window_bytes} in "
            f"{self.read_timeout_s:g} s: slower than the minimum of {self.min_body_rate} "
            f"bytes/s"
        )

    def _process(self, request: _Request) -> _Answer:
        """Worker: decode the body, ingest it, answer (also a refusal or a failure)."""
        answer_type = JSON if request.content_type == JSON else PROTOBUF
        try:
            result = self._ingest(request)
        except _HttpError as exc:
            body = status_body(exc.status, str(exc), answer_type)
            return _Answer(exc.status, body, answer_type, exc.headers)
        except SpillFull as exc:
            headers = {"Retry-After": str(exc.retry_after_s)}
            body = status_body(HTTPStatus.SERVICE_UNAVAILABLE, str(exc), answer_type)
            return _Answer(HTTPStatus.SERVICE_UNAVAILABLE, body, answer_type, headers)
        except Exception as exc:  # a bug must still get an answer, and the log its trace
            return _internal_error(exc, answer_type)
        signal = request.signal
        if answer_type == JSON:
            body = response_json(result.rejected_spans, result.error_message, signal)
        else:
            response = signal.response()
            if result.rejected_spans:
                setattr(response.partial_success, signal.rejected_field, result.rejected_spans)
                response.partial_success.error_message = result.error_message
            body = response.SerializeToString()
        return _Answer(HTTPStatus.OK, body, answer_type)

    def _ingest(self, request: _Request) -> IngestResult:
        """Decompress and decode the body, then run the pipeline on its spans (or log
        records)."""
        limit = self.max_body_bytes
        try:
            body = decompress_bounded(request.body, request.content_encoding, limit)
        except BodyTooLarge as exc:
            raise _HttpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc)) from exc
        except MalformedBody as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, str(exc)) from exc
        signal = request.signal
        ingest = self.pipeline.ingest_logs if signal is LOGS else self.pipeline.ingest
        if request.content_type == JSON:
            decoded, refused = _decode_json(body, signal)
            return ingest(decoded, request.tenant, request.deadline, refused=refused)
        parsed = signal.request()
        try:
            parsed.ParseFromString(body)
        except DecodeError as exc:
            raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP protobuf: {exc}") from exc
        return ingest(parsed, request.tenant, request.deadline, body)


def _internal_error(exc: Exception, answer_type: str) -> _Answer:
    """The 500 of a bug (its trace goes to the log)."""
    log.exception("OTLP/HTTP request failed")
    message = f"internal error: {type(exc).__name__}: {exc}"
    body = status_body(HTTPStatus.INTERNAL_SERVER_ERROR, message, answer_type)
    return _Answer(HTTPStatus.INTERNAL_SERVER_ERROR, body, answer_type)


def _decode_json(body: bytes, signal: Signal) -> tuple[Any, Rejections]:
    """The spans (or records) of an OTLP/JSON body that decode, and the refused ones; 400
    when it cannot be decoded at all, or none of its spans can."""
    try:
        decoded = decode_export_request_json(body, signal)
    except OtlpJsonError as exc:
        raise _HttpError(HTTPStatus.BAD_REQUEST, f"invalid OTLP/JSON: {exc}") from exc
    refused = Rejections()
    for span in decoded.refused:
        refused.add(span.line)
    if decoded.refused and len(decoded.refused) == decoded.spans:
        message = f"invalid OTLP/JSON, no {signal.noun} could be decoded: {refused.error_message}"
        raise _HttpError(HTTPStatus.BAD_REQUEST, message)
    return decoded.request, refused


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request's headers by lower-case name (the first of repeated ones)."""
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return headers


def _check_route(scope: dict[str, Any], content_type: str) -> None:
    """505 for an HTTP version other than 1.x; 404 for GET or another path; 501 for a
    method other than POST; 415 for a content type other than protobuf or JSON."""
    version = scope["http_version"]
    if version not in ("1.0", "1.1"):
        raise _HttpError(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"HTTP/{version} not supported")
    method = scope["method"]
    if method == "GET":
        raise _HttpError(
            HTTPStatus.NOT_FOUND, f"POST OTLP traces to {TRACES_PATH}, logs to {LOGS_PATH}"
        )
    if method != "POST":
        raise _HttpError(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({method!r})")
    path = scope["path"]
    if path not in SIGNALS:
        raise _HttpError(
            HTTPStatus.NOT_FOUND, f"no such path {path}; use {TRACES_PATH} or {LOGS_PATH}"
        )
    if content_type not in (PROTOBUF, JSON):
        raise _HttpError(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            f"Content-Type {content_type or '(none)'} is not supported; use {PROTOBUF} or {JSON}",
        )


def _content_length(headers: dict[str, str]) -> int:
    """The Content-Length (the parser refused a malformed or repeated one); 411 without
    one, or with a Transfer-Encoding (bodies are framed by length here)."""
    if "transfer-encoding" in headers:
        raise _HttpError(HTTPStatus.LENGTH_REQUIRED, TRANSFER_ENCODING_REFUSED)
    if "content-length" not in headers:
        raise _HttpError(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
    return int(headers["content-length"])
