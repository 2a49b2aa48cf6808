"""One OTLP/HTTP logs endpoint: POST an `ExportLogsServiceRequest` (protobuf, gzip by
default) and say what the receiver's answer means for the records in it.

- 2xx: delivered; the answer's partial success counts the records the receiver rejected
  for good (`Answer.rejected`, with its message).
- 400 and 413: this request is refused as it is (a bad or too large payload): `refused`,
  so the caller can send its halves apart.
- 408, 429, 5xx, a timeout or a connection error: `retry` (after the answer's Retry-After
  when it gives one).
- any other 4xx (401, 403, 404, 415, ...): `retry` as well: the endpoint or its credentials
  are wrong, which an operator mends; nothing is given up meanwhile.

https uses the system's trust store (as the alert webhook does).
"""

from __future__ import annotations

import gzip
import ssl
from dataclasses import dataclass
from typing import Literal

import httpx
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

MAX_ANSWER_BYTES = 1 << 20
"""An answer's body is read up to this much (a partial-success message; the rest unread)."""
_REFUSED = frozenset({400, 413})
PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class Answer:
    """What became of one request."""

    outcome: Literal["delivered", "refused", "retry"]
    reason: str = ""
    retry_after_s: float | None = None
    rejected: int = 0  # delivered, but the receiver rejected this many records


class LogsEndpoint:
    """Requests to one OTLP/HTTP logs URL over a kept-alive connection."""

    def __init__(
        self, url: str, headers: dict[str, str], timeout_s: float, compression: str = "gzip"
    ) -> None:
        self.url = url
        self.gzip = compression == "gzip"
        sent = {**headers, "Content-Type": PROTOBUF}
        if self.gzip:
            sent["Content-Encoding"] = "gzip"
        self._client = httpx.Client(
            headers=sent, timeout=timeout_s, verify=ssl.create_default_context()
        )

    def send(self, request: ExportLogsServiceRequest) -> Answer:
        """POST `request` and classify the answer (module docstring)."""
        body = request.SerializeToString()
        if self.gzip:
            body = gzip.compress(body, compresslevel=6)
        try:
            with self._client.stream("POST", self.url, content=body) as response:
                answer = _bounded_body(response)
        except httpx.HTTPError as exc:
            return Answer("retry", f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
        status = response.status_code
        if 200 <= status < 300:
            return _delivered(answer, response.headers.get("content-type", ""))
        reason = f"HTTP {status}" + (f": {_text(answer)}" if answer else "")
        if status in _REFUSED:
            return Answer("refused", reason)
        return Answer("retry", reason, _retry_after(response.headers.get("retry-after")))

    def close(self) -> None:
        self._client.close()


def _bounded_body(response: httpx.Response) -> bytes:
    """The answer's body, at most MAX_ANSWER_BYTES of it."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk[: MAX_ANSWER_BYTES - len(body)]
        if len(body) >= MAX_ANSWER_BYTES:
            break
    return bytes(body)


def _delivered(body: bytes, content_type: str) -> Answer:
    """A 2xx answer: its partial success when it is an OTLP protobuf answer."""
    if not body or not content_type.startswith(PROTOBUF):
        return Answer("delivered")
    response = ExportLogsServiceResponse()
    try:
        response.ParseFromString(body)
    except DecodeError:
        return Answer("delivered")
    partial = response.partial_success
    return Answer("delivered", partial.error_message, rejected=partial.rejected_log_records)


def _retry_after(value: str | None) -> float | None:
    """Seconds of a Retry-After header given in seconds (None for a date or nothing)."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


def _text(body: bytes) -> str:
    """The start of an answer's body, for a log line."""
    return body[:200].decode(errors="replace").strip()
