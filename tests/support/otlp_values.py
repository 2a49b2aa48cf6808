"""OTLP/JSON values for tests of nesting limits."""

from __future__ import annotations

from typing import Any


def nested_value(levels: int, kind: str, leaf: str = "x") -> dict[str, Any]:
    """An OTLP/JSON AnyValue: a string `leaf` inside `levels` arrays ("array") or
    key-value lists ("kvlist")."""
    value: dict[str, Any] = {"stringValue": leaf}
    for _ in range(levels):
        value = (
            {"arrayValue": {"values": [value]}}
            if kind == "array"
            else {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        )
    return value
