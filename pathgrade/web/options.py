"""`UiOptions`: the options of `pathgrade ui` (the browser UI as its own box), with their
defaults and descriptions; the command line's help and docs/ui.md's table read them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class UiOptions(BaseModel):
    """Options of `pathgrade ui`, besides the ClickHouse server it reads."""

    model_config = ConfigDict(extra="forbid")

    listen: str = Field(
        "127.0.0.1:8080",
        description="address to serve on, HOST:PORT; anything but loopback needs `tokens_file`",
    )
    tokens_file: Path | None = Field(
        None,
        description="YAML token -> tenant (the collector's format): each viewer logs in with a "
        "token and sees only its tenant; without it the UI serves loopback only, every tenant",
    )
    metrics: list[str] = Field(
        default_factory=list,
        description="boxes' /metrics URLs (collector, store writer, realtime), read for the "
        "health page and the stopped-pipeline banner",
    )
