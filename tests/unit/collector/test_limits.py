"""Tests for collector.limits: bounded decompression of request bodies."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
from pathgrade.collector.limits import (
    DEFAULT_MAX_BODY_BYTES,
    BodyTooLarge,
    MalformedBody,
    decompress_bounded,
)

PAYLOAD = b"resourceSpans " * 1000
BOMB_SIZE = 200 * 1024 * 1024


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """200 MiB of zeros, gzip-compressed without ever holding the 200 MiB in memory."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1024 * 1024)
    parts = [compressor.compress(zeros) for _ in range(BOMB_SIZE // len(zeros))]
    parts.append(compressor.flush())
    return b"".join(parts)


def test_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_BODY_BYTES == 64 * 1024 * 1024


@pytest.mark.parametrize("encoding", [None, "", "identity", "IDENTITY"])
def test_identity_passes_body_through(encoding: str | None) -> None:
    assert decompress_bounded(PAYLOAD, encoding, len(PAYLOAD)) == PAYLOAD


def test_identity_over_limit_is_refused() -> None:
    with pytest.raises(BodyTooLarge) as info:
        decompress_bounded(PAYLOAD, None, len(PAYLOAD) - 1)
    assert info.value.limit == len(PAYLOAD) - 1
    assert str(len(PAYLOAD) - 1) in str(info.value)
    assert "max_body_bytes" in str(info.value)


@pytest.mark.parametrize("encoding", ["gzip", "GZip", "x-gzip"])
def test_gzip_round_trip(encoding: str) -> None:
    assert decompress_bounded(gzip.compress(PAYLOAD), encoding, len(PAYLOAD)) == PAYLOAD


def test_gzip_concatenated_members_are_all_decoded() -> None:
    body = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress_bounded(body, "gzip", 100) == b"first second"


def test_gzip_limit_applies_across_members() -> None:
    body = gzip.compress(b"a" * 60) + gzip.compress(b"b" * 60)
    with pytest.raises(BodyTooLarge):
        decompress_bounded(body, "gzip", 100)


def test_gzip_exactly_at_limit_is_accepted() -> None:
    assert decompress_bounded(gzip.compress(PAYLOAD), "gzip", len(PAYLOAD)) == PAYLOAD
    with pytest.raises(BodyTooLarge):
        decompress_bounded(gzip.compress(PAYLOAD), "gzip", len(PAYLOAD) - 1)


def test_deflate_zlib_wrapped_and_raw() -> None:
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    raw_body = raw.compress(PAYLOAD) + raw.flush()
    assert decompress_bounded(zlib.compress(PAYLOAD), "deflate", len(PAYLOAD)) == PAYLOAD
    assert decompress_bounded(raw_body, "deflate", len(PAYLOAD)) == PAYLOAD


def test_corrupt_gzip_is_malformed() -> None:
    with pytest.raises(MalformedBody, match="invalid gzip stream"):
        decompress_bounded(b"not gzip at all", "gzip", 1000)


def test_truncated_gzip_is_malformed() -> None:
    body = gzip.compress(PAYLOAD)
    with pytest.raises(MalformedBody, match="truncated gzip stream"):
        decompress_bounded(body[: len(body) // 2], "gzip", len(PAYLOAD))


def test_empty_gzip_body_is_malformed() -> None:
    with pytest.raises(MalformedBody, match="empty gzip"):
        decompress_bounded(b"", "gzip", 1000)


def test_unsupported_encoding_is_named() -> None:
    with pytest.raises(MalformedBody, match="'br'"):
        decompress_bounded(b"x", "br", 1000)


def test_gzip_bomb_is_refused_with_low_peak_memory(gzip_bomb: bytes) -> None:
    limit = 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge):
            decompress_bounded(gzip_bomb, "gzip", limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(gzip_bomb) < BOMB_SIZE // 100  # it really is a bomb
    assert peak < 8 * limit, f"peak {peak} bytes while refusing a {BOMB_SIZE}-byte bomb"
