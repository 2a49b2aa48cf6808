"""Who is looking at the browser UI, and which tenant's rows they may read.

With a tokens file (the collector's format: YAML `token: tenant`) every request must carry
a known token, as `Authorization: Bearer <token>` or the cookie the login page sets, and
the viewer sees only that token's tenant: every query a page makes is scoped by
`Viewer.where` (`batch_plane.store.tenancy`). Without a tokens file the UI serves loopback
only and the viewer sees every tenant, as `pathgrade sql` does on the same machine.
"""

from __future__ import annotations

from pathlib import Path

from pathgrade.batch_plane.store.tenancy import EVERY_TENANT, Viewer
from pathgrade.transport.bearer_tokens import TokenAuth, Unauthenticated

TOKEN_COOKIE = "pathgrade_token"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class Refused(Exception):
    """The request may not see any page: no or unknown token, or a host not on loopback."""


class Viewers:
    """Decides the viewer of each request from its token (or, without a tokens file, lets
    only loopback hosts in)."""

    def __init__(self, tokens_file: Path | None = None) -> None:
        self.auth = TokenAuth.from_file(tokens_file) if tokens_file is not None else None

    @property
    def need_tokens(self) -> bool:
        return self.auth is not None

    def viewer(self, host: str, authorization: str | None, cookie_token: str | None) -> Viewer:
        """The viewer of a request with this Host header, Authorization header and login
        cookie; Refused says why there is none."""
        if self.auth is None:
            if host_name(host) not in LOOPBACK_HOSTS:
                raise Refused(f"Host {host!r} is not loopback (start the UI with --tokens-file)")
            return EVERY_TENANT
        credential = authorization or (f"Bearer {cookie_token}" if cookie_token else None)
        try:
            return Viewer(self.auth.tenant(credential))
        except Unauthenticated as exc:
            raise Refused(str(exc)) from exc

    def check_token(self, token: str) -> bool:
        """Whether `token` names a tenant (the login form)."""
        if self.auth is None:
            return False
        try:
            self.auth.tenant(f"Bearer {token}")
        except Unauthenticated:
            return False
        return True


def host_name(host: str) -> str:
    """The name in a Host header: `127.0.0.1:8080` -> `127.0.0.1`, `[::1]:80` -> `::1`."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if ":" in host else host
