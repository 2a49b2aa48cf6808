"""The embedded stack's settings, checked in the parent before any process starts: a bad
one is a one-line error naming it, never a child's traceback after the broker started."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from pathgrade.batch_plane.export.config import ExportConfig
from pathgrade.collector.config import CollectorConfig
from pathgrade.detectors import PolicyError, load_policy
from pathgrade.realtime_plane.config import RealtimeConfig
from pathgrade.transport.bearer_tokens import TokenAuth


class StackSettingsError(ValueError):
    """A setting of the stack's processes is invalid; the message names it and why."""


def validation_problems(
    exc: ValidationError, labels: Mapping[str, str] | None = None, source: str = ""
) -> str:
    """Each problem of `exc` as `name: reason`, `;`-separated: a field is named by
    `labels` (e.g. the flag that set it) where it has an entry, else by `source` (e.g. the
    settings file) and its dotted path."""
    labels = labels or {}
    problems = []
    for error in exc.errors():
        field = ".".join(map(str, error["loc"]))
        problems.append(f"{labels.get(field, source + field)}: {error['msg']}")
    return "; ".join(problems)


def check_collector(
    settings: Mapping[str, Any], labels: Mapping[str, str] | None = None, source: str = ""
) -> CollectorConfig:
    """The collector's config from `settings` (the broker and spill directory filled in
    if missing), its tokens file read; StackSettingsError otherwise (`validation_problems`
    names the fields)."""
    try:
        config = CollectorConfig.model_validate(
            {"kafka_bootstrap": "-", "spill_dir": ".", **settings}
        )
    except ValidationError as exc:
        raise StackSettingsError(validation_problems(exc, labels, source)) from None
    try:
        TokenAuth.from_file(config.tokens_file)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        label = (labels or {}).get("tokens_file", source + "tokens_file")
        raise StackSettingsError(f"{label}: {exc}") from None
    return config


def check_realtime(settings: Mapping[str, Any], source: str = "realtime settings: ") -> None:
    """StackSettingsError naming the fields when `settings` are no RealtimeConfig."""
    try:
        RealtimeConfig.model_validate({"bootstrap_servers": "-", **settings})
    except ValidationError as exc:
        raise StackSettingsError(validation_problems(exc, source=source)) from None


def check_policy(path: str | None) -> None:
    """StackSettingsError when the detector policy file at `path` does not load."""
    try:
        load_policy(path)
    except (OSError, PolicyError) as exc:
        raise StackSettingsError(f"policy: {exc}") from None


def check_export(
    settings: Mapping[str, Any], labels: Mapping[str, str] | None = None, source: str = ""
) -> ExportConfig:
    """The results exporter's config from `settings`; StackSettingsError naming the fields
    (by `labels`, e.g. the flags that set them) otherwise."""
    try:
        return ExportConfig.model_validate(settings)
    except ValidationError as exc:
        raise StackSettingsError(validation_problems(exc, labels, source)) from None
