"""Keyed fingerprints: equality of values that are never stored.

A deployment has one secret (32 random bytes in a key file, `FactSecret`); it is read by
the processes that compute fingerprints (the collector, and offline scoring that matches
a dataset's expected calls) and never written to Kafka or ClickHouse. Each tenant gets its
own key derived from it (HMAC-SHA256 of the tenant name), so fingerprints of one tenant do
not correlate with another's.

A fingerprint is `<key id>:<digest>`: the key id (8 hex) names the tenant key it was made
with, the digest is the first 128 bits of HMAC-SHA256(tenant key, canonical text), in hex.
Two fingerprints are comparable only when their key ids are equal (`same_value`).

Canonical text of a value: a string is its own text; any other JSON value is its JSON text
with sorted keys, no spaces, UTF-8, and floats holding an integer written as integers
(`49.0` is `49`). So `1234` and `"1234"` fingerprint alike, as an identity argument and a
session id compare.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

from pathgrade.content.memo import BoundedMemo
from pathgrade.schemas.json_text import sorted_compact

KEY_FILE_NAME: Final = "facts.key"  # the key file's name in a data or spill directory
SECRET_BYTES: Final = 32
KEY_ID_CHARS: Final = 8
DIGEST_BYTES: Final = 16
_TENANT_LABEL: Final = b"pathgrade/facts/v1/tenant:"
_KEY_ID_LABEL: Final = b"pathgrade/facts/v1/key-id"
_BLOCK_BYTES: Final = 64  # SHA-256's block: HMAC pads its key to this
_REMEMBERED: Final = 4096  # fingerprints of short texts a tenant key remembers
_REMEMBERED_CHARS: Final = 256


def canonical_text(value: Any) -> str:
    """The text a value is fingerprinted as (see the module doc)."""
    if isinstance(value, str):
        return value
    return sorted_compact(_integral_floats(value))


def _integral_floats(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _integral_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_integral_floats(v) for v in value]
    return value


class TenantKey:
    """One tenant's fingerprint key. HMAC-SHA256 is computed from the key's inner and
    outer hash states, made once and copied per fingerprint (RFC 2104's precomputation:
    the same digest as `hmac.digest`, at half its cost per call). The fingerprints of
    short texts are remembered (bounded): identities, ids and argument values repeat."""

    __slots__ = ("_inner", "_outer", "_prefix", "_remembered", "key", "key_id")

    def __init__(self, key: bytes) -> None:
        self.key = key  # the HMAC key, for code that computes the same fingerprints natively
        if len(key) > _BLOCK_BYTES:
            key = hashlib.sha256(key).digest()
        padded = key.ljust(_BLOCK_BYTES, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))
        self.key_id = hmac.digest(key, _KEY_ID_LABEL, "sha256").hex()[:KEY_ID_CHARS]
        self._prefix = self.key_id + ":"
        self._remembered: BoundedMemo[str, str] = BoundedMemo(_REMEMBERED)

    def fingerprint(self, value: Any) -> str:
        """`<key id>:<digest>` of the canonical text of `value`."""
        text = value if isinstance(value, str) else canonical_text(value)
        known = self._remembered.get(text)
        if known is not None:
            return known
        inner = self._inner.copy()
        inner.update(text.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        made = self._prefix + outer.digest()[:DIGEST_BYTES].hex()
        if len(text) <= _REMEMBERED_CHARS:
            self._remembered.put(text, made)
        return made

    def __repr__(self) -> str:  # never the key itself
        return f"TenantKey(key_id={self.key_id!r})"


class FactSecret:
    """The deployment's secret; `for_tenant` derives (and remembers) each tenant's key."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < SECRET_BYTES:
            raise ValueError(f"fact secret: expected at least {SECRET_BYTES} bytes")
        self._secret = secret
        self.for_tenant = lru_cache(maxsize=1024)(self._derive)

    def _derive(self, tenant: str) -> TenantKey:
        return TenantKey(hmac.digest(self._secret, _TENANT_LABEL + tenant.encode(), "sha256"))

    def __repr__(self) -> str:
        return "FactSecret(<hidden>)"

    @classmethod
    def from_file(cls, path: str | Path) -> FactSecret:
        """The secret in a key file (64 hex characters); ValueError naming the file when
        it does not hold one."""
        path = Path(path)
        try:
            text = path.read_text().strip()
        except OSError as exc:
            raise ValueError(f"fact key file {path}: cannot read it: {exc.strerror}") from exc
        try:
            secret = bytes.fromhex(text)
        except ValueError:
            secret = b""
        if len(secret) != SECRET_BYTES:
            raise ValueError(
                f"fact key file {path}: expected {2 * SECRET_BYTES} hex characters "
                "(e.g. `openssl rand -hex 32 > FILE`)"
            )
        return cls(secret)

    @classmethod
    def load_or_create(cls, path: str | Path) -> FactSecret:
        """The secret in `path`, created there (mode 0600) with a fresh random secret
        when the file does not exist yet."""
        path = Path(path)
        if not path.exists():
            write_key_file(path)
        return cls.from_file(path)


def write_key_file(path: str | Path) -> None:
    """Write a fresh random secret to a new key file readable by its owner only;
    FileExistsError when the file exists (a key is never overwritten)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(SECRET_BYTES) + "\n")


def key_id_of(fingerprint: str) -> str:
    """The key id of a fingerprint ("" when it is not one)."""
    key_id, sep, _ = fingerprint.partition(":")
    return key_id if sep else ""


def same_value(left: str, right: str) -> bool | None:
    """Whether two fingerprints are of equal values; None when they were made with
    different keys (or are not fingerprints) and so cannot be compared."""
    left_id, right_id = key_id_of(left), key_id_of(right)
    if not left_id or left_id != right_id:
        return None
    return left == right


def is_fingerprint(value: object) -> bool:
    """True for a string of the fingerprint format (`<8 hex>:<32 hex>`)."""
    if not isinstance(value, str) or len(value) != KEY_ID_CHARS + 1 + 2 * DIGEST_BYTES:
        return False
    key_id, sep, digest = value.partition(":")
    return bool(sep) and _is_hex(key_id) and _is_hex(digest)


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)
