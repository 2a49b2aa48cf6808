"""`ExportConfig`: every setting of the OTLP results exporter (a light module: the command
line reads its defaults and descriptions for the flags of `pathgrade up` and `pathgrade
exporter`)."""

from __future__ import annotations

import hashlib
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, field_validator

LOGS_PATH = "/v1/logs"
"""What a URL without a path gets: the OTLP/HTTP logs endpoint's path."""


class ExportConfig(BaseModel):
    """Where scores and alerts go as OTLP log records, and how they are batched and
    retried."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="OTLP/HTTP logs endpoint (http(s)://host:port/v1/logs; a URL without a "
        "path gets /v1/logs)"
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="headers of every request (authentication)"
    )
    tenants: list[str] = Field(
        default_factory=list, description="export only these tenants' rows (none: every tenant's)"
    )
    batch_records: int = Field(512, ge=1, le=10_000, description="records per request at most")
    batch_bytes: int = Field(
        1 << 20, ge=64 << 10, le=64 << 20,
        description="bytes per request at most (before compression)",
    )  # fmt: skip
    text_chars: int = Field(
        4096, ge=64, le=65_536,
        description="longest text a record carries (an explanation or reason is cut there)",
    )  # fmt: skip
    settle_s: float = Field(
        5.0, ge=0, le=300,
        description="read a row once the store has held it this long (an insert commits a "
        "moment after the row's time is taken)",
    )  # fmt: skip
    recheck_window_s: float = Field(
        600.0, ge=0, le=86_400,
        description="seconds of stored rows recounted to find rows that committed later "
        "than `settle_s` (they are sent then); 0 never",
    )  # fmt: skip
    recheck_every_s: PositiveFloat = Field(30.0, description="how often to recount")
    poll_s: PositiveFloat = Field(1.0, description="wait between reads when nothing is new")
    timeout_s: PositiveFloat = Field(10.0, description="timeout of one request")
    backoff_s: PositiveFloat = Field(
        1.0, description="first wait before retrying a failed request (doubles, with jitter)"
    )
    max_backoff_s: PositiveFloat = Field(60.0, description="longest wait between retries")
    compression: Literal["gzip", "none"] = Field("gzip", description="request body encoding")

    @field_validator("url")
    @classmethod
    def _logs_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected http(s)://host[:port][/path], got {url!r}")
        if parts.path in ("", "/"):
            parts = parts._replace(path=LOGS_PATH)
        return urlunsplit(parts)

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not name or not name.isascii() or any(c in name for c in " :\r\n\t"):
                raise ValueError(f"header name {name!r}: expected a token (no spaces or colons)")
            if any(c in value for c in "\r\n"):
                raise ValueError(f"header {name}: a value may not hold a line break")
        return headers

    @property
    def exporter_id(self) -> str:
        """The key of this exporter's cursors: a hash of the URL and the tenants (another
        URL or other tenants start from the rows stored after they were set; headers, with
        their credentials, may change without losing the place)."""
        identity = "\n".join([self.url, *sorted(self.tenants)])
        return hashlib.sha256(identity.encode()).hexdigest()[:16]
