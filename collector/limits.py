"""The collector's limits (request bodies, Kafka messages, OTLP/HTTP connections: the
defaults `collector.config` documents, with nothing to import but the standard library),
and bounded request-body decoding: never inflate a compressed body past the configured
limit."""

from __future__ import annotations

import zlib

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
"""Default cap on a request body after decompression (config `max_body_bytes`)."""
DEFAULT_MAX_MESSAGE_BYTES = 900 * 1024  # under Kafka's default message.max.bytes (1 MiB)
PRODUCER_MAX_REQUEST_BYTES = 16 * 1024 * 1024
"""The producer's `max_request_size`: the largest record it sends (collector.publisher)."""
MAX_MESSAGE_BYTES_LIMIT = PRODUCER_MAX_REQUEST_BYTES - 64 * 1024
"""Largest `max_message_bytes` allowed: a message and its record framing and headers
must stay under the producer's request size."""
DEFAULT_WORKERS = 32
DEFAULT_IDLE_TIMEOUT_S = 60.0
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_MAX_CONNECTIONS = 4096
DEFAULT_MIN_BODY_RATE = 64 * 1024
"""Slowest a body may arrive, in bytes per second, counted per `read_timeout_s` (the
request handler's bound, `collector.http_receiver`)."""

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS
_IDENTITY_ENCODINGS = frozenset({"", "identity"})
_GZIP_ENCODINGS = frozenset({"gzip", "x-gzip"})


class BodyTooLarge(ValueError):
    """The (decompressed) body is larger than the configured limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(
            f"request body exceeds the limit of {limit} bytes after decompression; "
            "raise the collector config `max_body_bytes` to accept larger requests"
        )


class MalformedBody(ValueError):
    """The body cannot be decoded: a corrupt stream or an unsupported Content-Encoding."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"malformed request body: {reason}")


def decompress_bounded(body: bytes, content_encoding: str | None, limit: int) -> bytes:
    """Decode `body` per its Content-Encoding, refusing to produce more than `limit` bytes.

    Supports identity, gzip (including concatenated members) and deflate (zlib-wrapped, or
    raw as some clients send it). At most `limit + 1` bytes are ever inflated, so a
    compression bomb costs no more memory than a body at the limit.
    """
    encoding = (content_encoding or "").strip().lower()
    if encoding in _IDENTITY_ENCODINGS:
        if len(body) > limit:
            raise BodyTooLarge(limit)
        return body
    if encoding in _GZIP_ENCODINGS:
        return _inflate(body, _GZIP_WBITS, limit, "gzip")
    if encoding == "deflate":
        wbits = _ZLIB_WBITS if _has_zlib_header(body) else _RAW_DEFLATE_WBITS
        return _inflate(body, wbits, limit, "deflate")
    raise MalformedBody(
        f"unsupported Content-Encoding {content_encoding!r} (supported: identity, gzip, deflate)"
    )


def _has_zlib_header(body: bytes) -> bool:
    """True when `body` starts with a valid RFC 1950 zlib header (CM=8, FCHECK ok)."""
    return len(body) >= 2 and body[0] & 0x0F == 8 and (body[0] << 8 | body[1]) % 31 == 0


def _inflate(body: bytes, wbits: int, limit: int, encoding: str) -> bytes:
    """Inflate every member of `body` with `wbits`, stopping as soon as `limit` is passed."""
    if not body:
        raise MalformedBody(f"empty {encoding} stream")
    chunks: list[bytes] = []
    produced = 0
    pending = body
    while pending:
        inflater = zlib.decompressobj(wbits)
        try:
            while not inflater.eof:
                chunk = inflater.decompress(pending, limit + 1 - produced)
                produced += len(chunk)
                if produced > limit:
                    raise BodyTooLarge(limit)
                chunks.append(chunk)
                pending = inflater.unconsumed_tail
                if not chunk and not pending:
                    raise MalformedBody(f"truncated {encoding} stream")
        except zlib.error as exc:
            raise MalformedBody(f"invalid {encoding} stream: {exc}") from exc
        pending = inflater.unused_data if wbits == _GZIP_WBITS else b""
    return b"".join(chunks)
