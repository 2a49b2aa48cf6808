"""`JudgeEndpoint`: where a judge is and how to call it (a light module: the command line
reads its fields' defaults and descriptions for the judge flags)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class JudgeEndpoint(BaseModel):
    """Where the judge is and how to call it. The API key is read from `api_key_env`.
    `JudgeEndpoint(base_url, model, **settings)`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(
        description="OpenAI-compatible base URL, the path up to /chat/completions "
        "(e.g. https://api.openai.com/v1)"
    )
    model: str = Field(description="pinned judge model id")
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="environment variable holding the judge API key"
    )
    provider: str = Field("openai", description="the model's provider in the price table")
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema", description="how the answer's JSON shape is asked for"
    )
    timeout_s: float = Field(60.0, description="timeout of one request")
    max_attempts: int = Field(5, description="requests per verdict at most (retries included)")
    backoff_base_s: float = Field(0.5, description="first retry's backoff (doubling, jittered)")
    backoff_max_s: float = Field(30.0, description="longest backoff between retries")
    concurrency: int = Field(8, description="judge requests in flight")

    def __init__(
        self, base_url: str | None = None, model: str | None = None, /, **settings: Any
    ) -> None:
        """The first two fields may be given by position."""
        given = {"base_url": base_url, "model": model}
        super().__init__(**{k: v for k, v in given.items() if v is not None}, **settings)
