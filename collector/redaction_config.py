"""`RedactionConfig`: what the collector lets through, apart from the redactor that applies
it (`collector.redact`), so the command line and the collector's config read it without
importing the redactor."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator


class RedactionConfig(BaseModel):
    """What the collector lets through: captured content, and allowed keys' values as
    (scrubbed) text; everything else is removed or withheld."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    capture_tools: list[str] = Field(
        default_factory=list,
        description='tool names whose arguments and results are kept (`"*"`: all); others are '
        "dropped before Kafka",
    )
    capture_messages: bool = Field(
        default=False,
        description="keep prompts, completions, system instructions",
    )
    capture_identity: bool = Field(
        default=False,
        description="keep the session identity (`enduser.id`, `user.id`, OpenLLMetry's "
        "`user_id` association property); without it only its fingerprint travels",
    )
    extra_patterns: list[str] = Field(
        default_factory=list,
        description="extra regexes scrubbed from every forwarded string (e-mail addresses and "
        "Luhn-valid card numbers always are, after normalisation)",
    )
    allowed_keys: list[str] = Field(
        default_factory=list,
        description="attribute keys whose values are forwarded as (scrubbed) text besides the "
        "default list (docs/collector.md); exact keys, or patterns with `*`, `?`, `[...]`; "
        "`status.message` forwards the span's status message. Any other value travels as its "
        "keyed fingerprint, type and the kinds of personal data found in it, never as text",
    )

    @field_validator("allowed_keys")
    @classmethod
    def _keys_named(cls, keys: list[str]) -> list[str]:
        for index, key in enumerate(keys):
            if not key.strip():
                raise ValueError(f"allowed_keys[{index}] is empty: name a key or a pattern")
        return keys

    @field_validator("extra_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for index, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(
                    f"extra_patterns[{index}] {pattern!r} is not a valid regular expression: {exc}"
                ) from exc
        return patterns
