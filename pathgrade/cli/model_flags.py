"""Flags that set a pydantic model's field: their help is the field's description and
default, their default the field's (`model_flag`). The docs generator (`cli.reference`)
renders defaults the same way (`shown`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import BaseModel

MODEL_FIELD = "model_field"
"""The attribute `model_flag` sets on a flag's argparse action: (model, field name)."""


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default of `model`'s field `name` (its factory called)."""
    return model.model_fields[name].get_default(call_default_factory=True)


def field_help(
    model: type[BaseModel], name: str, with_default: bool = True, prefix: str = "", suffix: str = ""
) -> str:
    """A flag's help: the field's description (between `prefix` and `suffix`), and its
    default unless `with_default` is False or the field has none (required, or None)."""
    info = model.model_fields[name]
    text = prefix + (info.description or "") + suffix
    default = None if info.is_required() else info.get_default(call_default_factory=True)
    if with_default and default is not None:
        text += f" (default {shown(default)})"
    return text.replace("%", "%%")


def model_flag(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    model: type[BaseModel],
    name: str,
    *,
    unset: bool = False,
    prefix: str = "",
    suffix: str = "",
    **kwargs: Any,
) -> argparse.Action:
    """Add `flag` setting `model`'s field `name`: its help is the field's description
    (between `prefix` and `suffix`) and default, its default the field's; with `unset` the
    flag's absence is None (a settings file or the model fills the field in) and the help
    still shows the model's default. A required field, or one whose default is None,
    shows no default (the flag's absence is None). The action carries MODEL_FIELD, so a
    test can compare every such flag with its field."""
    required = model.model_fields[name].is_required()
    kwargs["help"] = field_help(model, name, prefix=prefix, suffix=suffix)
    kwargs["default"] = None if unset or required else field_default(model, name)
    action = parser.add_argument(flag, **kwargs)
    setattr(action, MODEL_FIELD, (model, name))
    return action


def shown(value: Any) -> str:
    """A default as a YAML reader writes it."""
    if value is None:
        return "none"
    if value == "":
        return '""'
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple, frozenset, set, dict)):
        return json.dumps(
            sorted(value) if isinstance(value, (set, frozenset)) else value,
            default=lambda model: model.model_dump(mode="json"),
        )
    return str(value)
