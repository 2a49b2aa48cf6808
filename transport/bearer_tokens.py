"""Tenant from the authenticated connection: an optional bearer-token file.

The file is YAML (or JSON) mapping token -> tenant. Without a file every request is
tenant `default`. A span attribute never sets the tenant.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml
from pathgrade.schemas.topics import DEFAULT_TENANT


class Unauthenticated(Exception):
    """A missing or unknown bearer token while a token file is configured."""


class TokenAuth:
    """Resolves the `Authorization: Bearer <token>` header to a tenant."""

    def __init__(self, tokens: dict[str, str] | None = None) -> None:
        self._by_digest = (
            None if tokens is None else {_digest(token): tenant for token, tenant in tokens.items()}
        )

    @classmethod
    def from_file(cls, path: str | Path | None) -> TokenAuth:
        if path is None:
            return cls(None)
        data = yaml.safe_load(Path(path).read_text())
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and v for k, v in data.items()
        ):
            raise ValueError(f"{path}: expected a mapping of token -> tenant (non-empty strings)")
        return cls(data)

    def tenant(self, authorization: str | None) -> str:
        """The tenant for an Authorization header value; raises Unauthenticated."""
        if self._by_digest is None:
            return DEFAULT_TENANT
        if not authorization:
            raise Unauthenticated("missing bearer token (Authorization: Bearer <token>)")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization header is not of the form 'Bearer <token>'")
        tenant = self._by_digest.get(_digest(token.strip()))
        if tenant is None:
            raise Unauthenticated("unknown bearer token")
        return tenant


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
